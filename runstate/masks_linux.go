package runstate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
)

// Masks are the placeholders bwrap creates on the host as mount points that
// keep missing protected paths from being created (mounts.Plan.Masks).
// Concurrent runs may share a writable root, and so a placeholder: each run
// holds a shared flock on the placeholder's registry entry while it runs,
// and the last one out removes the placeholder. A registry entry without a
// live holder (its run was killed) marks a leftover the next run reuses and
// removes.
//
// An entry is written before its placeholder is made and removed after it
// is gone, and the registry's own lock orders the rest: every look at the
// placeholders (MaskView) holds it shared, every removal exclusive. What a
// look saw stays so until it ends: a run's rendering does not take another
// run's placeholder for the user's own directory and bind it, only to find
// it gone when bwrap starts.
type Masks struct {
	dir   string
	held  []*os.File
	paths []string
}

// lockName is the registry's lock file; entries are named in hex.
const lockName = "lock"

func registryName(dir, path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(dir, hex.EncodeToString(sum[:16]))
}

// lockRegistry makes dir and flocks its lock file (how: unix.LOCK_SH or
// LOCK_EX). The lock file is never removed.
func lockRegistry(dir string, how int) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mask registry: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err == nil {
		if err = unix.Flock(int(f.Fd()), how); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("mask registry lock: %w", err)
	}
	return f, nil
}

// ErrRegistryBusy is a removal that did not get the registry within its
// wait: another run's look at it lasts (the checks after a run walk the
// writable roots in one look, as long as the agent made them to take).
// The placeholders stay, registered, for a later run to remove: a run that
// ends must not wait on another's walk, nor a run that starts.
var ErrRegistryBusy = errors.New("the mask registry is busy")

// Waits for the registry's exclusive lock: a release, then a sweep, which
// the next run repeats anyway.
var (
	releaseWait = 5 * time.Second
	sweepWait   = 500 * time.Millisecond
)

// lockRegistryWithin is lockRegistry that waits at most wait for how,
// else returns ErrRegistryBusy. A request given up on is left to finish
// and then let go.
func lockRegistryWithin(dir string, how int, wait time.Duration) (*os.File, error) {
	f, err := lockRegistry(dir, how|unix.LOCK_NB)
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return f, err
	}
	f, err = os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("mask registry lock: %w", err)
	}
	got := make(chan error, 1)
	go func() { got <- unix.Flock(int(f.Fd()), how) }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("mask registry lock: %w", err)
		}
		return f, nil
	case <-timer.C:
		go func() {
			<-got
			f.Close()
		}()
		return nil, fmt.Errorf("%w: another run's look at it lasted over %v", ErrRegistryBusy, wait)
	}
}

// MaskView is a look at the registry that no removal interrupts: until
// Close, every placeholder IsMask answers for stays as it is.
type MaskView struct {
	dir  string
	lock *os.File
}

// ViewMasks starts a look at the registry in dir. On error the view it
// returns still answers, without the lock, for a caller that would rather
// go on than stop.
func ViewMasks(dir string) (*MaskView, error) {
	f, err := lockRegistry(dir, unix.LOCK_SH)
	return &MaskView{dir: dir, lock: f}, err
}

// IsMask reports whether path is registered as a mask placeholder (of a
// live run, or of one that was killed), so that rendering treats it as
// missing rather than as the user's file.
func (v *MaskView) IsMask(path string) bool { return Registered(v.dir, path) }

// Registered is IsMask without a look's lock: what it says may change at
// once (a placeholder is registered before it is made, and removed before
// its entry), which a caller that walks for long without holding up
// other runs' removals tells apart itself (mounts' placeholderDisk).
func Registered(dir, path string) bool {
	data, err := os.ReadFile(registryName(dir, path))
	return err == nil && string(data) == path
}

// Close ends the look.
func (v *MaskView) Close() {
	if v.lock != nil {
		v.lock.Close()
		v.lock = nil
	}
}

// Hold registers paths and holds a shared lock on each entry until
// Release. Call it in the view the plan was rendered in, before bwrap
// starts: no other run's Release then removes a placeholder this run took
// for missing, or one it is about to rely on.
func (v *MaskView) Hold(paths []string) (*Masks, error) {
	m := &Masks{dir: v.dir, paths: paths}
	var made []*os.File // the entries this Hold created
	for _, p := range paths {
		name := registryName(v.dir, p)
		f, err := hostfs.LockEntry(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, unix.LOCK_SH)
		if err == nil {
			made = append(made, f)
		} else if errors.Is(err, fs.ErrExist) {
			f, err = hostfs.LockEntry(name, os.O_RDWR|os.O_CREATE, unix.LOCK_SH)
		}
		if err == nil {
			m.held = append(m.held, f)
			_, err = f.WriteAt([]byte(p), 0)
		}
		if err != nil {
			// No placeholder was made for these: the entries this Hold
			// created and no other run holds go (their own lock taken
			// exclusively; the registry's, which the caller's view
			// holds shared, is not needed for an entry with no
			// placeholder). The rest only let go.
			for _, f := range made {
				if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
					os.Remove(f.Name())
				}
			}
			m.let()
			return nil, fmt.Errorf("mask registry entry for %s: %w", p, err)
		}
	}
	return m, nil
}

// let closes the entries m holds.
func (m *Masks) let() {
	for _, f := range m.held {
		f.Close()
	}
	m.held = nil
}

// Release drops this run's hold and removes every placeholder no other live
// run holds: the empty file or directory bwrap made, then its registry
// entry. A directory comes after the files that may lie in it.
func (m *Masks) Release() error {
	if m == nil {
		return nil
	}
	m.let()
	names := make([]string, len(m.paths))
	for i, p := range m.paths {
		names[i] = registryName(m.dir, p)
	}
	if !anyUnheld(names) {
		m.paths = nil
		return nil // other live runs hold them all: the last one out removes them
	}
	lock, err := lockRegistryWithin(m.dir, unix.LOCK_EX, releaseWait)
	if errors.Is(err, ErrRegistryBusy) {
		left := m.paths
		m.paths = nil
		some := strings.Join(left[:min(len(left), 3)], ", ")
		if len(left) > 3 {
			some += ", …"
		}
		return fmt.Errorf("%d mask placeholders left in place (%s): %w; the next run removes them (every start sweeps the registry)", len(left), some, err)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	var errs []error
	for _, p := range m.paths {
		if err := removeUnheld(m.dir, registryName(m.dir, p), p); err != nil {
			errs = append(errs, err)
		}
	}
	m.paths = nil
	return errors.Join(errs...)
}

// SweepMasks removes what killed runs left: every registered placeholder
// that no live run holds, and its entry. A run killed with SIGKILL cannot
// remove its own; the next run of agentjail does, whatever its writable
// roots.
func SweepMasks(dir string) error {
	// A first look, without the registry's lock, that finds every entry
	// held (by live runs) spares the wait for other runs' views.
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("mask registry: %w", err)
	}
	var all []string
	for _, e := range entries {
		if e.Name() != lockName {
			all = append(all, filepath.Join(dir, e.Name()))
		}
	}
	if !anyUnheld(all) {
		return nil
	}
	lock, err := lockRegistryWithin(dir, unix.LOCK_EX, sweepWait)
	if errors.Is(err, ErrRegistryBusy) {
		return nil // the next run sweeps
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	names := registered(dir)
	// Deeper placeholders first: a directory one may lie in is empty only
	// once they are gone.
	order := slices.SortedFunc(maps.Keys(names), func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(names[b], "/"), strings.Count(names[a], "/")), cmp.Compare(a, b))
	})
	var errs []error
	for _, name := range order {
		if err := removeUnheld(dir, filepath.Join(dir, name), ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// anyUnheld reports whether any of the entries named exists without a
// live run's hold on it: one that may have a placeholder to remove.
func anyUnheld(names []string) bool {
	for _, name := range names {
		f, err := os.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			continue // gone: another run removed it
		}
		unheld := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
		f.Close()
		if unheld {
			return true
		}
	}
	return false
}

// registered maps the registry's entries to the paths they name.
func registered(dir string) map[string]string {
	entries, _ := os.ReadDir(dir)
	names := make(map[string]string, len(entries))
	for _, e := range entries {
		if e.Name() != lockName {
			data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			names[e.Name()] = string(data)
		}
	}
	return names
}

// removeUnheld removes the placeholder registered in entry name (its path
// is the entry's content; want, when set, must match it) and the entry,
// unless a live run holds it. A directory placeholder that is not empty
// because a placeholder registered in dir lies in it (another live run's,
// whose profile masks less) keeps its entry: it is a placeholder still.
// Call it with the registry locked exclusively.
func removeUnheld(dir, name, want string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil // another run removed it
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil // a live run relies on it
	}
	data, _ := io.ReadAll(io.LimitReader(f, 1<<16))
	p := string(data)
	var err2 error
	if p != "" && (want == "" || p == want) && filepath.IsAbs(p) {
		err := removeEmpty(p)
		switch {
		case errors.Is(err, unix.ENOTEMPTY) && slices.ContainsFunc(slices.Collect(maps.Values(registered(dir))), func(q string) bool { return strings.HasPrefix(q, p+"/") }):
			return nil
		case err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ENOTEMPTY):
			err2 = fmt.Errorf("remove mask placeholder %s: %w", p, err)
		}
	}
	os.Remove(name)
	return err2
}

// removeEmpty deletes p if it is an empty regular file or an empty
// directory, never following a symlink: its directory is reached without
// one (hostfs.Strict: openat2 RESOLVE_NO_SYMLINKS, or one O_NOFOLLOW
// component at a time before Linux 5.6), and the entry is examined with
// AT_SYMLINK_NOFOLLOW. Anything else is left alone (someone wrote to it;
// rmdir(2) refuses a directory that is not empty: ENOTEMPTY).
func removeEmpty(p string) error {
	dir, name, err := hostfs.Strict.Parent(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	st, err := dir.Lstat(name)
	if err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return dir.RemoveDir(name)
	case st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0:
		return nil
	}
	return dir.Remove(name)
}

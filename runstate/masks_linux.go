package runstate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
type Masks struct {
	dir   string
	held  []*os.File
	paths []string
}

func registryName(dir, path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(dir, hex.EncodeToString(sum[:16]))
}

// IsMask reports whether path is registered in dir as a mask placeholder
// (of a live run, or of one that was killed), so that rendering treats it as
// missing rather than as the user's file.
func IsMask(dir, path string) bool {
	data, err := os.ReadFile(registryName(dir, path))
	return err == nil && string(data) == path
}

// HoldMasks registers paths in dir and holds a shared lock on each entry
// until Release. Call it before bwrap starts, so no other run's Release
// removes a placeholder this run is about to rely on.
func HoldMasks(dir string, paths []string) (*Masks, error) {
	m := &Masks{dir: dir, paths: paths}
	if len(paths) == 0 {
		return m, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mask registry: %w", err)
	}
	for _, p := range paths {
		f, err := hostfs.LockEntry(registryName(dir, p), os.O_RDWR|os.O_CREATE, unix.LOCK_SH)
		if err == nil {
			_, err = f.WriteAt([]byte(p), 0)
		}
		if err != nil {
			m.Release()
			return nil, fmt.Errorf("mask registry entry for %s: %w", p, err)
		}
		m.held = append(m.held, f)
	}
	return m, nil
}

// Release drops this run's hold and removes every placeholder no other live
// run holds: the empty file or directory bwrap made, then its registry
// entry. A directory comes after the files that may lie in it.
func (m *Masks) Release() error {
	for _, f := range m.held {
		f.Close()
	}
	m.held = nil
	var errs []error
	for _, p := range m.paths {
		if err := removeUnheld(registryName(m.dir, p), p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SweepMasks removes what killed runs left: every registered placeholder
// that no live run holds, and its entry. A run killed with SIGKILL cannot
// remove its own; the next run of agentjail does, whatever its writable
// roots.
func SweepMasks(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("mask registry: %w", err)
	}
	// Deeper placeholders first: a directory one may lie in is empty only
	// once they are gone.
	names := make(map[string]string, len(entries))
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		names[e.Name()] = string(data)
	}
	order := slices.SortedFunc(maps.Keys(names), func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(names[b], "/"), strings.Count(names[a], "/")), cmp.Compare(a, b))
	})
	var errs []error
	for _, name := range order {
		if err := removeUnheld(filepath.Join(dir, name), ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeUnheld removes the placeholder registered in entry name (its path
// is the entry's content; want, when set, must match it) and the entry,
// unless a live run holds it.
func removeUnheld(name, want string) error {
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
		if err := removeEmpty(p); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ENOTEMPTY) {
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

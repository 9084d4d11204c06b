package runstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// twoRuns are two runs holding the placeholder ph.
func twoRuns(t *testing.T, reg, ph string) (a, b *Masks) {
	t.Helper()
	for _, m := range []**Masks{&a, &b} {
		var err error
		if *m, err = holdMasks(reg, []string{ph}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func holdMasks(reg string, paths []string) (*Masks, error) {
	v, err := ViewMasks(reg)
	defer v.Close()
	if err != nil {
		return nil, err
	}
	return v.Hold(paths)
}

func isMask(reg, path string) bool {
	v, _ := ViewMasks(reg)
	defer v.Close()
	return v.IsMask(path)
}

// TestMaskViewHoldsRemovalsOff: while a look at the registry lasts, no
// run's release removes a placeholder it saw (the window in which one run
// rendered another's placeholder as the user's directory and bwrap then
// found it gone); the release waits, and removes it once the look ends.
func TestMaskViewHoldsRemovalsOff(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	ph := filepath.Join(root, ".claude")
	m, err := holdMasks(reg, []string{ph})
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(ph, 0o755)
	v, err := ViewMasks(reg)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- m.Release() }()
	// The release is waiting on the registry's lock (/proc/locks lists
	// a blocked request with "->").
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(reg, lockName), &st); err != nil {
		t.Fatal(err)
	}
	inode := fmt.Sprintf(":%d ", st.Ino)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		locks, _ := os.ReadFile("/proc/locks")
		if blockedOn(string(locks), inode) {
			break
		}
		select {
		case err := <-released:
			t.Fatalf("the release went ahead during a look (%v)", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the release never waited for the look")
		}
	}
	if !fileExists(ph) || !v.IsMask(ph) {
		t.Fatal("the placeholder changed during the look")
	}
	v.Close()
	if err := <-released; err != nil || fileExists(ph) {
		t.Errorf("after the look: %v; placeholder left: %v", err, fileExists(ph))
	}
}

func blockedOn(locks, inode string) bool {
	for _, l := range strings.Split(locks, "\n") {
		if strings.Contains(l, "->") && strings.Contains(l, "FLOCK") && strings.Contains(l, inode) {
			return true
		}
	}
	return false
}

// TestMasksDirectoryKeepsItsEntryWhileInUse: a directory placeholder
// another live run's placeholder lies in (its profile masks only the file)
// is a placeholder still: its entry stays until it can go, so no rendering
// takes it for the user's directory meanwhile.
func TestMasksDirectoryKeepsItsEntryWhileInUse(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	d := filepath.Join(root, ".claude")
	f := filepath.Join(d, "settings.json")
	a, err := holdMasks(reg, []string{f, d})
	if err != nil {
		t.Fatal(err)
	}
	b, err := holdMasks(reg, []string{f})
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(d, 0o755)
	os.WriteFile(f, nil, 0o444)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if !fileExists(d) || !isMask(reg, d) {
		t.Fatalf("the directory placeholder lost its entry while a placeholder in it is held (there: %v)", fileExists(d))
	}
	b.Release()
	if err := SweepMasks(reg); err != nil || fileExists(d) || isMask(reg, d) {
		t.Errorf("the sweep after the last run: %v; directory left: %v", err, fileExists(d))
	}
}

func TestMasksLastRunOutRemovesPlaceholder(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	ph := filepath.Join(root, ".mcp.json")
	a, b := twoRuns(t, reg, ph)
	os.WriteFile(ph, nil, 0o444) // what bwrap creates as the mount point
	if !isMask(reg, ph) || isMask(reg, ph+"x") {
		t.Fatalf("registry does not know %s", ph)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ph); err != nil {
		t.Fatal("the first run out removed a placeholder the second still holds")
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ph); !os.IsNotExist(err) {
		t.Fatal("the last run out left the placeholder")
	}
	if left := registered(reg); len(left) != 0 || isMask(reg, ph) {
		t.Errorf("registry entries left: %v", left)
	}
}

// TestMasksLeaveWhatIsNotEmpty: a placeholder someone wrote to, a
// directory placeholder someone put a file in, and anything reached
// through a symlink are left where they are.
func TestMasksLeaveWhatIsNotEmpty(t *testing.T) {
	t.Parallel()
	reg, root, outside := t.TempDir(), t.TempDir(), t.TempDir()
	written := filepath.Join(root, "written")
	os.WriteFile(written, []byte("someone wrote here"), 0o644)
	asDir := filepath.Join(root, "dir")
	os.Mkdir(asDir, 0o755)
	os.WriteFile(filepath.Join(asDir, "f"), nil, 0o644)
	// A symlinked parent must not be followed: the empty file behind it
	// belongs to someone else.
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, nil, 0o644)
	os.Symlink(outside, filepath.Join(root, "link"))
	viaLink := filepath.Join(root, "link", "victim")
	m, err := holdMasks(reg, []string{written, asDir, viaLink, filepath.Join(root, "never-created")})
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	for _, p := range []string{written, asDir, victim} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed", p)
		}
	}
}

// TestMasksRemoveAnEmptyDirectory: the placeholder of a tmpfs over a
// missing directory (mounts' protection.dirs) is an empty directory, which
// the last run out removes after the files of its own registered in it,
// whatever the order the sweep finds them in.
func TestMasksRemoveAnEmptyDirectory(t *testing.T) {
	t.Parallel()
	for _, sweep := range []bool{false, true} {
		reg, root := t.TempDir(), t.TempDir()
		d := filepath.Join(root, ".claude")
		// A file whose registry entry a listing finds after the
		// directory's: removed first anyway.
		var f string
		for i := 0; f == "" || filepath.Base(registryName(reg, f)) < filepath.Base(registryName(reg, d)); i++ {
			f = filepath.Join(d, fmt.Sprintf("settings%d.json", i))
		}
		m, err := holdMasks(reg, []string{f, d})
		if err != nil {
			t.Fatal(err)
		}
		os.Mkdir(d, 0o755)
		os.WriteFile(f, nil, 0o444)
		if sweep {
			for _, h := range m.held {
				h.Close() // killed
			}
			err = SweepMasks(reg)
		} else {
			err = m.Release()
		}
		if err != nil || fileExists(d) {
			t.Errorf("sweep %v: %v; the directory placeholder is left: %v", sweep, err, fileExists(d))
		}
	}
}

// TestSweepMasksRemovesWhatKilledRunsLeft: a run killed with SIGKILL
// leaves its placeholder and registry entry; the next run's sweep removes
// them, whatever its own roots, but never one a live run holds.
func TestSweepMasksRemovesWhatKilledRunsLeft(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	dead, live := filepath.Join(root, ".mcp.json"), filepath.Join(root, ".env")
	killed, err := holdMasks(reg, []string{dead})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dead, nil, 0o444)
	for _, f := range killed.held {
		f.Close() // what the kernel does to a killed run's locks
	}
	running, err := holdMasks(reg, []string{live})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(live, nil, 0o444)
	if err := SweepMasks(reg); err != nil {
		t.Fatal(err)
	}
	if fileExists(dead) || isMask(reg, dead) {
		t.Error("the killed run's placeholder or entry is left")
	}
	if !fileExists(live) || !isMask(reg, live) {
		t.Error("the sweep removed a placeholder a live run holds")
	}
	running.Release()
	if fileExists(live) {
		t.Error("the live run's release left its placeholder")
	}
	if err := SweepMasks(filepath.Join(reg, "missing")); err != nil {
		t.Errorf("a missing registry: %v", err)
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// returns runs f and fails t if it has not returned within 30 s (a wait
// on a lock that cannot come).
func returns(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never returned", what)
		return nil
	}
}

// TestMaskHoldFailsWithoutWaiting: a Hold that cannot register an entry
// fails at once, inside the view it was called in (a release would wait
// for the view's own lock), and takes back the entries it created, which
// name no placeholder; another live run's entry stays.
func TestMaskHoldFailsWithoutWaiting(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	ok, bad, shared := filepath.Join(root, ".env"), filepath.Join(root, ".npmrc"), filepath.Join(root, ".mcp.json")
	other, err := holdMasks(reg, []string{shared})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	os.Mkdir(registryName(reg, bad), 0o700) // no entry can be opened there
	v, err := ViewMasks(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := returns(t, "Hold", func() error { _, err := v.Hold([]string{ok, shared, bad}); return err }); err == nil {
		t.Fatal("Hold registered an entry it cannot open")
	}
	if v.IsMask(ok) || !v.IsMask(shared) {
		t.Errorf("after the failed Hold: %s registered %v (want false), %s %v (want true)", ok, v.IsMask(ok), shared, v.IsMask(shared))
	}
	v.Close()
}

// TestSweepMasksSkipsWhatLiveRunsHold: a sweep that finds every entry
// held by a live run removes nothing and does not wait for another run's
// look at the registry (a run's start would wait on every other run's
// snapshot), nor does a release whose entries others hold.
func TestSweepMasksSkipsWhatLiveRunsHold(t *testing.T) {
	t.Parallel()
	reg, root := t.TempDir(), t.TempDir()
	ph := filepath.Join(root, ".env")
	a, b := twoRuns(t, reg, ph)
	os.WriteFile(ph, nil, 0o444)
	v, err := ViewMasks(reg)
	if err != nil {
		t.Fatal(err)
	}
	returns(t, "SweepMasks", func() error { return SweepMasks(reg) })
	returns(t, "Release", a.Release)
	v.Close()
	if !fileExists(ph) {
		t.Error("a placeholder a live run holds was removed")
	}
	b.Release()
	if fileExists(ph) {
		t.Error("the last run out left its placeholder")
	}
}

// TestSweepMasksSaysWhatItCannotRead: a registry that is missing is
// nothing to sweep; one that cannot be read is said, not taken for empty.
func TestSweepMasksSaysWhatItCannotRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := SweepMasks(filepath.Join(dir, "none")); err != nil {
		t.Errorf("a missing registry: %v, want nothing to do", err)
	}
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o600)
	if err := SweepMasks(notDir); err == nil || !strings.HasPrefix(err.Error(), "mask registry: ") {
		t.Errorf("a registry that is a file: %v, want an error naming the mask registry", err)
	}
}

// TestReleaseGivesUpOnABusyRegistry: a look that lasts (another run's
// checks over millions of files) keeps a release waiting a few seconds
// at most; its placeholders stay, registered, and the next sweep removes
// them. Not parallel: it shortens the wait.
func TestReleaseGivesUpOnABusyRegistry(t *testing.T) {
	defer func(w time.Duration) { releaseWait = w }(releaseWait)
	releaseWait = 50 * time.Millisecond
	reg, root := t.TempDir(), t.TempDir()
	ph := filepath.Join(root, ".env")
	m, err := holdMasks(reg, []string{ph})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(ph, nil, 0o444)
	v, err := ViewMasks(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(); !errors.Is(err, ErrRegistryBusy) || !strings.Contains(err.Error(), "1 mask placeholders left in place ("+ph+")") {
		t.Errorf("Release = %v, want ErrRegistryBusy naming the placeholder left", err)
	}
	if !fileExists(ph) || !v.IsMask(ph) {
		t.Error("the placeholder or its entry went during the look")
	}
	v.Close()
	if err := SweepMasks(reg); err != nil || fileExists(ph) {
		t.Errorf("the sweep after the look: %v; placeholder left: %v", err, fileExists(ph))
	}
}

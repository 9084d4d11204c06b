package hostfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/record"
)

func TestStripSetIDOfWhatTheRunMade(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	since := RunClock()
	made := filepath.Join(root, "sub", "made")
	os.MkdirAll(filepath.Dir(made), 0o755)
	os.WriteFile(made, []byte("x"), 0o755)
	unix.Chmod(made, 0o6755)
	plain := filepath.Join(root, "plain")
	os.WriteFile(plain, []byte("x"), 0o755)
	setgidDir := filepath.Join(root, "shared")
	os.Mkdir(setgidDir, 0o755)
	unix.Chmod(setgidDir, 0o2775)
	// A link is never followed: the set-id file it names is not the run's.
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("x"), 0o755)
	unix.Chmod(victim, 0o4755)
	os.Symlink(victim, filepath.Join(root, "link"))

	notes, err := StripSetID([]string{root}, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].What != record.ViolationSetID || !strings.HasPrefix(notes[0].Detail, made+": ") || !strings.Contains(notes[0].Detail, "mode 6755") {
		t.Fatalf("notes = %v", notes)
	}
	for p, want := range map[string]os.FileMode{made: 0o755, plain: 0o755, victim: 0o755 | os.ModeSetuid, setgidDir: os.ModeDir | 0o775 | os.ModeSetgid} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}

func TestStripSetIDLeavesWhatWasThereBefore(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	old := filepath.Join(root, "old")
	os.WriteFile(old, []byte("x"), 0o755)
	unix.Chmod(old, 0o4755)
	// A run that started later (in the next second) did not make it.
	later := RunClock()
	later.Sec += 2
	notes, err := StripSetID([]string{root}, later)
	if err != nil || len(notes) != 0 {
		t.Fatalf("notes %v, err %v", notes, err)
	}
	if fi, _ := os.Stat(old); fi.Mode()&os.ModeSetuid == 0 {
		t.Error("a set-id file older than the run lost its bit")
	}
}

func TestStripSetIDRemovesDeviceNodes(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	root := t.TempDir()
	since := RunClock()
	dev := filepath.Join(root, "mem")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	notes, err := StripSetID([]string{root}, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].What != record.ViolationDevice || !strings.Contains(notes[0].Detail, "(1:3)") {
		t.Fatalf("notes = %v", notes)
	}
	if _, err := os.Lstat(dev); !os.IsNotExist(err) {
		t.Error("the device node is still there")
	}
}

func TestChangedSince(t *testing.T) {
	t.Parallel()
	since := unix.Timespec{Sec: 100, Nsec: 500}
	for _, c := range []struct {
		ctime unix.Timespec
		want  bool
	}{
		{unix.Timespec{Sec: 100, Nsec: 500}, true},
		{unix.Timespec{Sec: 100, Nsec: 499}, false},
		{unix.Timespec{Sec: 101, Nsec: 1}, true},
		{unix.Timespec{Sec: 99, Nsec: 999999999}, false},
		{unix.Timespec{Sec: 100}, true}, // whole seconds only: the launch's second counts
		{unix.Timespec{Sec: 99}, false},
	} {
		if got := changedSince(c.ctime, since); got != c.want {
			t.Errorf("changedSince(%v, %v) = %v", c.ctime, since, got)
		}
	}
}

// TestScanAfterRunFindsNewGit: every .git born since the run started is
// returned, a directory or a file, wherever it lies (node_modules, below
// a directory's objects); one that was there before is returned as
// changed when it, or anything it holds, changed since (a directory
// renamed to .git keeps its birth time), and not at all when untouched.
func TestScanAfterRunFindsNewGit(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"old/.git/objects", "quiet/.git/objects", "edited/.git", "node_modules/pkg/prepared/hooks"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "edited/.git/config"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "node_modules/pkg/prepared/config"), nil, 0o644)
	time.Sleep(20 * time.Millisecond) // the coarse clock moves (no timing is asserted)
	since := RunClock()
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(filepath.Join(root, "old/.git/objects/new"), nil, 0o644)                               // the old .git changes
	os.WriteFile(filepath.Join(root, "edited/.git/config"), []byte("[core]\n\tfsmonitor = x\n"), 0o644) // in place
	// A directory made before the run, renamed to .git during it.
	os.Rename(filepath.Join(root, "node_modules/pkg/prepared"), filepath.Join(root, "node_modules/pkg/.git"))
	for _, d := range []string{"node_modules/x/.git", "vendor/objects/y/.git"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub/.git"), []byte("gitdir: ../elsewhere\n"), 0o644)
	scan, err := ScanAfterRun([]string{root}, since, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "node_modules/x/.git"), filepath.Join(root, "sub/.git"), filepath.Join(root, "vendor/objects/y/.git")}
	if !slices.Equal(scan.Born, want) {
		t.Errorf("born %q, want %q", scan.Born, want)
	}
	if want := []string{filepath.Join(root, "edited/.git"), filepath.Join(root, "node_modules/pkg/.git"), filepath.Join(root, "old/.git")}; !slices.Equal(scan.Changed, want) {
		t.Errorf("changed %q, want %q", scan.Changed, want)
	}
}

// TestScanAfterRunStopsAtItsDepth: a chain of directories as deep as the
// descriptor limit allows (a container's may be 1 048 576) made the walk
// hold a path per level, memory in the square of the depth (449 MB at
// 20 000 levels). Below maxWalkDepth nothing is walked, and that is said.
func TestScanAfterRunStopsAtItsDepth(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	since := RunClock()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range maxWalkDepth + 1 {
		if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Mkdirat(fd, ".git", 0o755) // below the cap: not seen
	unix.Close(fd)
	scan, err := ScanAfterRun([]string{root}, since, nil)
	if err == nil || !strings.Contains(err.Error(), "nested deeper than 2048 directories or 16384 bytes of path below its root") || len(scan.Born) != 0 {
		t.Errorf("ScanAfterRun = %v, born %q; want the depth said", err, scan.Born)
	}
}

// TestScanAfterRunStops: a walk told to stop (the run's checks cut short)
// strips nothing more and says where it stopped.
func TestScanAfterRunStops(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	since := RunClock()
	made := filepath.Join(root, "made")
	os.WriteFile(made, []byte("x"), 0o755)
	unix.Chmod(made, 0o2755)
	stop := make(chan struct{})
	close(stop)
	scan, err := ScanAfterRun([]string{root}, since, stop)
	if err == nil || !strings.Contains(err.Error(), root+": the walk was stopped here") || len(scan.Notes) != 0 {
		t.Errorf("ScanAfterRun = %v, notes %v; want stopped at the root", err, scan.Notes)
	}
	if fi, _ := os.Stat(made); fi.Mode()&os.ModeSetgid == 0 {
		t.Error("a stopped walk stripped a set-id bit")
	}
}

// TestScanAfterRunStopsAtItsPathLength: 255-byte names reach the path
// bound long before the depth's.
func TestScanAfterRunStopsAtItsPathLength(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	since := RunClock()
	name := strings.Repeat("n", 255)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range maxWalkPath/256 + 2 {
		unix.Mkdirat(fd, name, 0o755)
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	if _, err := ScanAfterRun([]string{root}, since, nil); err == nil || !strings.Contains(err.Error(), "16384 bytes of path below its root") {
		t.Errorf("ScanAfterRun = %.300v, want the path's length said", err)
	}
}

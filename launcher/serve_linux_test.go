package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTrim: after a burst, the waiting workers past the spares that have
// waited since before the cutoff are let go (their status pipes closed),
// those that waited longest first; the spares, the busy and the recently
// freed stay.
func TestTrim(t *testing.T) {
	now := time.Now()
	d := &daemon{o: Options{Spares: 2}, workers: map[int]*worker{}}
	pipes := map[int]*os.File{}
	add := func(pid int, idle bool, waited time.Duration) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		d.workers[pid] = &worker{status: r, idle: idle, since: now.Add(-waited)}
		pipes[pid] = w
	}
	add(1, true, time.Hour)      // let go: waited longest
	add(2, true, time.Minute)    // let go
	add(3, true, 40*time.Second) // kept: a spare
	add(4, true, time.Second)    // kept: a spare, and freed recently
	add(5, false, time.Hour)     // busy
	d.trim(now.Add(-trimAfter))
	for pid, want := range map[int]bool{1: true, 2: true, 3: false, 4: false, 5: false} {
		w := d.workers[pid]
		_, err := pipes[pid].Write([]byte{free})
		if gone := err != nil; gone != want {
			t.Errorf("worker %d: let go %v, want %v", pid, gone, want)
		}
		if want && w.idle {
			t.Errorf("worker %d let go but still counted waiting", pid)
		}
	}
	if n := d.idle(); n != 2 {
		t.Errorf("%d waiting after the trim, want the 2 spares", n)
	}
	// With no more waiting than the spares, nobody goes, however long.
	d.trim(now.Add(time.Hour))
	if n := d.idle(); n != 2 {
		t.Errorf("%d waiting after a second trim, want 2", n)
	}
}

// TestListenInAMissingDirectory: the socket's directory missing is said
// with the fix, not as a bare "no such file or directory".
func TestListenInAMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := listen(filepath.Join(dir, "launcher.sock"))
	if err == nil || !strings.Contains(err.Error(), "its directory "+dir+" does not exist: create it (mkdir -p "+dir+"), or give another --socket") {
		t.Errorf("listen = %v", err)
	}
}

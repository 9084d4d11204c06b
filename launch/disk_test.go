package launch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostDiskOpensOnlyFilesAndDirectories: a FIFO or a device where
// mounts expects a git file is refused before it is opened, instead of
// waiting for a writer for ever (os.DirFS's Open would) or running the
// device's open; a regular file and a directory open.
func TestHostDiskOpensOnlyFilesAndDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644)
	done := make(chan error, 1)
	go func() {
		for _, p := range []string{fifo, "/dev/null"} {
			if f, err := newHostDisk().Open(strings.TrimPrefix(p, "/")); err == nil || !strings.Contains(err.Error(), "not a regular file or a directory") {
				t.Errorf("Open(%s): %v", p, err)
				if f != nil {
					f.Close()
				}
			}
		}
		done <- nil
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang detector, not a timing
		t.Fatal("opening a FIFO through the host disk blocked")
	}
	for _, p := range []string{dir, filepath.Join(dir, "file")} {
		f, err := newHostDisk().Open(strings.TrimPrefix(p, "/"))
		if err != nil {
			t.Errorf("Open(%s): %v", p, err)
			continue
		}
		f.Close()
	}
	if entries, err := fs.ReadDir(newHostDisk(), strings.TrimPrefix(dir, "/")); err != nil || len(entries) != 2 {
		t.Errorf("ReadDir = %v, %v", entries, err)
	}
	if fi, err := fs.Stat(newHostDisk(), strings.TrimPrefix(fifo, "/")); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("Stat = %v, %v", fi, err)
	}
}

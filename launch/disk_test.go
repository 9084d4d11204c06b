package launch

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostDiskOpensAFIFOWithoutBlocking: a FIFO where mounts expects a git
// file is opened and found to be no regular file, instead of waiting for a
// writer for ever (os.DirFS's Open would).
func TestHostDiskOpensAFIFOWithoutBlocking(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "config")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(fifo, "/")
	done := make(chan error, 1)
	go func() {
		f, err := newHostDisk().Open(name)
		if err == nil {
			var fi fs.FileInfo
			if fi, err = f.Stat(); err == nil && fi.Mode().IsRegular() {
				t.Error("a FIFO stats as a regular file")
			}
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a hang detector, not a timing
		t.Fatal("opening a FIFO through the host disk blocked")
	}
	if fi, err := fs.Stat(newHostDisk(), name); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("Stat = %v, %v", fi, err)
	}
}

package hostfs

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte("extends: tier1\n"), 0o600)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, make([]byte, limit+1), 0o600)
	sock, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if data, err := ReadInput(file, limit, nil); err != nil || string(data) != "extends: tier1\n" {
		t.Errorf("a file: %q, %v", data, err)
	}
	if _, err := ReadInput(filepath.Join(dir, "none"), limit, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	for name, want := range map[string]string{
		dir:                     "a directory; give a regular file, or a pipe such as <(command)",
		"/dev/null":             "a device; give a regular file, or a pipe such as <(command)",
		filepath.Join(dir, "s"): "a socket; give a regular file, or a pipe such as <(command)",
		big:                     "131073 bytes, more than the 128 KiB an input file may have",
	} {
		if _, err := ReadInput(name, limit, nil); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

func TestReadInputPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		for range 3 {
			w.Write(make([]byte, limit/2))
		}
		w.Close()
	}()
	if _, err := ReadInput("/proc/self/fd/"+strconv.Itoa(int(r.Fd())), limit, nil); err == nil || err.Error() != "more than the 128 KiB an input file may have" {
		t.Errorf("an endless pipe: %v", err)
	}
}

// TestReadInputFIFO: a FIFO is read once its writer comes (before, it
// reads as its end, which must not pass for an empty file), and a signal
// ends the wait for one that never comes.
func TestReadInputFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	interrupt := make(chan os.Signal, 1)
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read)
	go func() {
		data, err := ReadInput(fifo, limit, interrupt)
		done <- read{data, err}
	}()
	// Opening for writing waits for the reader: readInput is then waiting.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("extends: tier2\n")
	w.Close()
	if got := <-done; got.err != nil || string(got.data) != "extends: tier2\n" {
		t.Errorf("FIFO: %q, %v", got.data, got.err)
	}

	go func() {
		data, err := ReadInput(fifo, limit, interrupt)
		done <- read{data, err}
	}()
	interrupt <- syscall.SIGTERM
	if got := <-done; got.err == nil || got.err.Error() != "interrupted by SIGTERM while waiting on the pipe" {
		t.Errorf("FIFO with no writer, SIGTERM: %q, %v", got.data, got.err)
	}
}

// limit is the cap agentjail gives ReadInput (policy.MaxFileSize).
const limit = 128 << 10

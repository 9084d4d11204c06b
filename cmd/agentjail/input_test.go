package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/urfave/cli/v3"
	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/policy"
)

func TestReadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte("extends: tier1\n"), 0o600)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, make([]byte, policy.MaxFileSize+1), 0o600)
	sock, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if data, err := readInput(file, nil); err != nil || string(data) != "extends: tier1\n" {
		t.Errorf("a file: %q, %v", data, err)
	}
	if _, err := readInput(filepath.Join(dir, "none"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	for name, want := range map[string]string{
		dir:                     "a directory; give a regular file, or a pipe such as <(command)",
		"/dev/null":             "a device; give a regular file, or a pipe such as <(command)",
		filepath.Join(dir, "s"): "a socket; give a regular file, or a pipe such as <(command)",
		big:                     "131073 bytes, more than the 128 KiB an input file may have",
	} {
		if _, err := readInput(name, nil); err == nil || err.Error() != want {
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
			w.Write(make([]byte, policy.MaxFileSize/2))
		}
		w.Close()
	}()
	if _, err := readInput("/proc/self/fd/"+strconv.Itoa(int(r.Fd())), nil); err == nil || err.Error() != "more than the 128 KiB an input file may have" {
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
		data, err := readInput(fifo, interrupt)
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
		data, err := readInput(fifo, interrupt)
		done <- read{data, err}
	}()
	interrupt <- syscall.SIGTERM
	if got := <-done; got.err == nil || got.err.Error() != "interrupted by SIGTERM while waiting on the pipe" {
		t.Errorf("FIFO with no writer, SIGTERM: %q, %v", got.data, got.err)
	}
}

// TestPrepareInterrupted: a SIGINT or SIGTERM that came while the profile
// was loaded ends prepare before it detects bwrap or makes anything.
func TestPrepareInterrupted(t *testing.T) {
	t.Parallel()
	interrupt := make(chan os.Signal, 1)
	interrupt <- syscall.SIGINT
	var err error
	cmd := &cli.Command{Name: "run", Flags: jailFlags(), Action: func(_ context.Context, cmd *cli.Command) error {
		_, err = prepare(cmd, []string{"true"}, interrupt)
		return nil
	}}
	if rerr := cmd.Run(context.Background(), []string{"run", "--profile", "tier1"}); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil || err.Error() != "interrupted by SIGINT while loading the profile; nothing ran" {
		t.Errorf("prepare: %v", err)
	}
}

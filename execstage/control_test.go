package execstage

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestControlChannel: what SendControl sends ReadControl reads, with the
// descriptors and the sender's pid; a message too long for the reader is
// an error that leaves the channel usable and leaks no descriptor; the
// channel's end is io.EOF.
func TestControlChannel(t *testing.T) {
	t.Parallel()
	ours, theirs, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := SendControl(int(theirs.Fd()), Message{Kind: KindPTY, PID: 7, PGID: 7}, int(r.Fd()), int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	m, files, err := ReadControl(ours)
	if err != nil || m.Kind != KindPTY || m.PID != 7 || m.PGID != 7 || m.Sender != os.Getpid() || len(files) != 2 {
		t.Fatalf("ReadControl: %+v, %d files, %v", m, len(files), err)
	}
	// The descriptors are the pipe's ends: what goes into one comes out
	// of the other.
	files[1].Write([]byte("x"))
	var b [1]byte
	if n, _ := files[0].Read(b[:]); n != 1 || b[0] != 'x' {
		t.Errorf("the files passed are not the pipe")
	}
	for _, f := range files {
		if flags, _ := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: not close-on-exec", f.Name())
		}
		f.Close()
	}

	if err := SendControl(int(theirs.Fd()), Message{Kind: strings.Repeat("k", MaxMessage)}); err == nil {
		t.Error("SendControl sent a message longer than MaxMessage")
	}
	// A sender that is not SendControl: the reader refuses what does not
	// fit, closes its descriptors and reads the next message.
	if err := unix.Sendmsg(int(theirs.Fd()), make([]byte, MaxMessage+1), unix.UnixRights(int(r.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	if _, files, err := ReadControl(ours); !errors.Is(err, ErrBadMessage) || files != nil {
		t.Errorf("a message too long: %d files, %v", len(files), err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before the refused message, %d after", before, after)
	}
	SendControl(int(theirs.Fd()), Message{Kind: KindListener, Addr: "127.0.0.1:1"})
	theirs.Close()
	if m, _, err := ReadControl(ours); err != nil || m.Addr != "127.0.0.1:1" {
		t.Errorf("after a refused message: %+v, %v", m, err)
	}
	if _, _, err := ReadControl(ours); err != io.EOF {
		t.Errorf("at the end: %v, not io.EOF", err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

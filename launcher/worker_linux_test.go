package launcher

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// TestWriteIfRoomLongLine: a refusal longer than the room left in a
// blocking pipe (one page: poll says it has room) is cut to PIPE_BUF and
// does not hold the worker; written whole, it filled the room and waited
// for ever for a reader.
func TestWriteIfRoomLongLine(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	page := unix.Getpagesize()
	if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 2*page); err != nil {
		t.Fatal(err)
	}
	if n, err := unix.Write(p[1], make([]byte, page)); n != page || err != nil {
		t.Fatalf("filling the first page: %d, %v", n, err)
	}
	done := make(chan struct{})
	go func() {
		writeIfRoom(p[1], "agentjail: launcher: "+strings.Repeat("x", 2*page)+"\n")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		unix.Close(p[0]) // the waiting write ends with EPIPE
		<-done
		t.Fatal("writeIfRoom waited on a pipe with room for part of its line")
	}
	defer unix.Close(p[0])
	got := make([]byte, 3*page)
	n, _ := unix.Read(p[0], got)
	line := string(got[page:n])
	if len(line) != pipeBuf || !strings.HasPrefix(line, "agentjail: launcher: xxx") || !strings.HasSuffix(line, cut) {
		t.Errorf("the pipe got %d bytes after the first page, ending %q; want the line cut to %d bytes, ending %q", len(line), line[max(0, len(line)-8):], pipeBuf, cut)
	}
}

// TestWriteIfRoomCutsAtACharacter: a long line whose cut falls inside a
// character loses that character whole, not half of it.
func TestWriteIfRoomCutsAtACharacter(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	prefix := "agentjail: launcher: "
	if (pipeBuf-len(cut)-len(prefix))%2 == 0 {
		prefix += " " // so that the cut falls inside a two-byte character
	}
	writeIfRoom(p[1], prefix+strings.Repeat("é", pipeBuf)+"\n")
	got := make([]byte, 2*pipeBuf)
	n, _ := unix.Read(p[0], got)
	line := string(got[:n])
	if !utf8.ValidString(line) || !strings.HasSuffix(line, "é"+cut) || len(line) != pipeBuf-1 {
		t.Errorf("the pipe got %d bytes ending %q, valid UTF-8 %v; want %d, whole characters, then %q", len(line), line[max(0, len(line)-8):], utf8.ValidString(line), pipeBuf-1, cut)
	}
}

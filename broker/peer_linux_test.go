package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWaitAll: what /proc/TID/syscall shows of a thread (its call's
// number and arguments, then its stack and instruction pointers) names
// the descriptor of a receive that asks for MSG_WAITALL, and nothing else.
func TestWaitAll(t *testing.T) {
	line := func(nr int, args ...uint64) []string {
		s := fmt.Sprint(nr)
		for _, a := range args {
			s += fmt.Sprintf(" %#x", a)
		}
		return strings.Fields(s + " 0x7ffd1c2e3f40 0x7f21b1a2c3d4")
	}
	for _, c := range []struct {
		name   string
		fields []string
		fd     string
	}{
		{"recvfrom, MSG_WAITALL", line(unix.SYS_RECVFROM, 5, 0xc000100000, 1<<20, unix.MSG_WAITALL, 0, 0), "5"},
		{"recvfrom, MSG_WAITALL among others", line(unix.SYS_RECVFROM, 12, 0xc000100000, 1<<20, unix.MSG_WAITALL|unix.MSG_NOSIGNAL, 0, 0), "12"},
		{"recvmsg, MSG_WAITALL", line(unix.SYS_RECVMSG, 7, 0x7ffd00001000, unix.MSG_WAITALL, 0, 0, 0), "7"},
		{"recvmmsg, MSG_WAITALL", line(unix.SYS_RECVMMSG, 9, 0x7ffd00001000, 4, unix.MSG_WAITALL, 0, 0), "9"},
		{"recvfrom, no flag", line(unix.SYS_RECVFROM, 5, 0xc000100000, 1<<20, 0, 0, 0), ""},
		{"recvmsg, the flag as its length would be", line(unix.SYS_RECVMSG, 7, 0x100, 0, 0, 0, 0), ""},
		{"read", line(unix.SYS_READ, 5, 0xc000100000, unix.MSG_WAITALL, 0, 0, 0), ""},
		{"running", []string{"running"}, ""},
		{"not in a call", []string{"-1", "0x7ffd1c2e3f40", "0x7f21b1a2c3d4"}, ""},
	} {
		fd, ok := waitAll(c.fields)
		if ok != (c.fd != "") || fd != c.fd {
			t.Errorf("%s: %q: got %q %v, want %q", c.name, c.fields, fd, ok, c.fd)
		}
	}
}

// TestRefusedHere: a host set to panic on a kernel warning, or one whose
// setting cannot be read, gets no kernel path; one that only logs them does.
func TestRefusedHere(t *testing.T) {
	for _, c := range []struct {
		name, value string
		refused     bool
	}{
		{"logs warnings", "0\n", false},
		{"panics on a warning", "1\n", true},
		{"cannot be read", "", true},
	} {
		root := t.TempDir()
		if c.value != "" {
			os.MkdirAll(filepath.Join(root, "sys/kernel"), 0o755)
			os.WriteFile(filepath.Join(root, "sys/kernel/panic_on_warn"), []byte(c.value), 0o644)
		}
		if why := refusedHere(root); (why != "") != c.refused {
			t.Errorf("%s: refusedHere = %q, want refused %v", c.name, why, c.refused)
		}
	}
}

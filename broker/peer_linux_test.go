package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStuckRead: what /proc/TID/syscall shows of a thread (its call's
// number and arguments, then its stack and instruction pointers) names
// the descriptor of a receive that asks for MSG_WAITALL, or of a splice's
// source, and nothing else.
func TestStuckRead(t *testing.T) {
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
		{"splice", line(unix.SYS_SPLICE, 6, 0, 11, 0, 1<<16, 0), "6"},
		{"read", line(unix.SYS_READ, 5, 0xc000100000, unix.MSG_WAITALL, 0, 0, 0), ""},
		{"running", []string{"running"}, ""},
		{"not in a call", []string{"-1", "0x7ffd1c2e3f40", "0x7f21b1a2c3d4"}, ""},
	} {
		fd, ok := stuckRead(c.fields)
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

// TestStuckReadOfThreads: stuckRead names the descriptor of a thread of
// this process that waits in recvfrom with MSG_WAITALL, and in splice, as
// this kernel shows them (the argument positions are the kernel's, not
// the test's), and not one that waits in a plain recvfrom.
func TestStuckReadOfThreads(t *testing.T) {
	for _, c := range []struct {
		name  string
		nr    int
		stuck bool
		wait  func(fd int)
	}{
		{"recvfrom, MSG_WAITALL", unix.SYS_RECVFROM, true, func(fd int) { unix.Recvfrom(fd, make([]byte, 64), unix.MSG_WAITALL) }},
		{"recvfrom", unix.SYS_RECVFROM, false, func(fd int) { unix.Recvfrom(fd, make([]byte, 64), 0) }},
		{"splice", unix.SYS_SPLICE, true, func(fd int) {
			var p [2]int
			if unix.Pipe2(p[:], unix.O_CLOEXEC) == nil {
				unix.Splice(fd, nil, p[1], nil, 64, 0)
				unix.Close(p[0])
				unix.Close(p[1])
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pair[0])
			defer unix.Close(pair[1])
			tids, done := make(chan int), make(chan struct{})
			go func() {
				runtime.LockOSThread() // not undone: the thread ends with it
				tids <- unix.Gettid()
				c.wait(pair[0])
				close(done)
			}()
			file := fmt.Sprintf("/proc/self/task/%d/syscall", <-tids)
			// Until the thread waits in the call: its number, six
			// arguments, two pointers.
			var fields []string
			for deadline := time.Now().Add(10 * time.Second); len(fields) != 9 || fields[0] != strconv.Itoa(c.nr); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: the thread never waited: %q", file, fields)
				}
				data, err := os.ReadFile(file)
				if err != nil {
					t.Skip("cannot read", file, err)
				}
				fields = strings.Fields(string(data))
			}
			fd, ok := stuckRead(fields)
			if want := strconv.Itoa(pair[0]); ok != c.stuck || (ok && fd != want) {
				t.Errorf("%q: got %q %v, want stuck %v on %s", fields, fd, ok, c.stuck, want)
			}
			unix.Write(pair[1], make([]byte, 64))
			<-done
		})
	}
}

// TestKernelPathSelfTest: on this host the kernel path is made, its
// self-test included (the redirected bytes arrive, and SIOCINQ counts
// them while unread: the broker's flow control reads it). Without the
// privileges for a sockhash, there is nothing to test.
func TestKernelPathSelfTest(t *testing.T) {
	start := time.Now()
	k, err := newKernelPath()
	if errors.Is(err, unix.EPERM) {
		t.Skip("no sockhash without CAP_BPF:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("made in %v", time.Since(start))
	k.close()
}

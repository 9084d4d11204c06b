package term

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty opens a pseudo-terminal pair (pty(7)); no privilege needed.
func pty(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

func modes(t *testing.T, f *os.File) unix.Termios {
	t.Helper()
	m, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return *m
}

// TestRestore: what `stty -echo raw` changed is put back, once.
func TestRestore(t *testing.T) {
	t.Parallel()
	_, tty := pty(t)
	before := modes(t, tty)
	s := Save(tty)
	if s == nil {
		t.Fatal("Save: a pty is not a terminal")
	}
	raw := before
	raw.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG
	raw.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Restore(); !changed || err != nil {
		t.Fatalf("Restore = %v, %v; want true, nil", changed, err)
	}
	if after := modes(t, tty); after != before {
		t.Errorf("modes after Restore:\n%+v\nwant\n%+v", after, before)
	}
	if changed, err := s.Restore(); changed || err != nil {
		t.Errorf("second Restore = %v, %v; want false, nil", changed, err)
	}
}

func TestNotATerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var buf bytes.Buffer
	for _, f := range []any{r, w, &buf, nil, (*os.File)(nil)} {
		if s := Save(f); s != nil {
			t.Errorf("Save(%T) = %+v, want nil", f, s)
		}
	}
	if changed, err := (*State)(nil).Restore(); changed || err != nil {
		t.Errorf("nil Restore = %v, %v", changed, err)
	}
	rw := ResetFirst(&buf)
	rw.Write([]byte("agentjail: x\n"))
	if buf.String() != "agentjail: x\n" {
		t.Errorf("not a terminal: wrote %q", buf.String())
	}
}

// TestResetFirst: the reset goes before the first write to a terminal,
// and only then.
func TestResetFirst(t *testing.T) {
	t.Parallel()
	master, tty := pty(t)
	raw := modes(t, tty)
	raw.Oflag &^= unix.OPOST // no \n -> \r\n
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	w := ResetFirst(tty)
	for _, s := range []string{"", "agentjail: one\n", "agentjail: two\n"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	want := Reset + "agentjail: one\nagentjail: two\n"
	got := make([]byte, 0, len(want))
	buf := make([]byte, 256)
	for len(got) < len(want) {
		n, err := master.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != want {
		t.Errorf("the terminal got %q, want %q", got, want)
	}
}

// TestRestoreInTheBackground: an agentjail that is a background job of
// the terminal still restores it: without SIGTTOU blocked the kernel
// would stop it (a shell's job) or refuse with EIO (an orphaned process
// group, as the helper's). The helper process leads a session on a pty,
// saves the modes, changes them, hands the foreground to another process
// group, and restores.
func TestRestoreInTheBackground(t *testing.T) {
	t.Parallel()
	_, tty := pty(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInTheBackground$")
	cmd.Env = append(os.Environ(), "TERM_TEST_HELPER=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The helper's own deadline ends it; a stop (SIGTTOU) is seen here.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil); err != nil {
		t.Fatal(err)
	}
	if ws.Stopped() {
		cmd.Process.Kill()
		syscall.Wait4(cmd.Process.Pid, nil, 0, nil)
		t.Fatalf("the helper was stopped by %v", ws.StopSignal())
	}
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("helper: %v\n%s", ws, out[:n])
	}
}

func TestHelperInTheBackground(t *testing.T) {
	if os.Getenv("TERM_TEST_HELPER") != "1" {
		t.Skip("helper process of TestRestoreInTheBackground")
	}
	go func() { time.Sleep(time.Minute); os.Exit(3) }()
	before := modes(t, os.Stdin)
	s := Save(os.Stdin)
	raw := before
	raw.Lflag &^= unix.ECHO | unix.ICANON
	if err := unix.IoctlSetTermios(0, unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	fg := exec.Command("sleep", "60")
	fg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	defer fg.Process.Kill()
	if err := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, fg.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if pgrp, _ := unix.IoctlGetInt(0, unix.TIOCGPGRP); pgrp == syscall.Getpgrp() {
		t.Fatal("still in the foreground")
	}
	if changed, err := s.Restore(); !changed || err != nil {
		t.Fatalf("Restore = %v, %v", changed, err)
	}
	if after := modes(t, os.Stdin); after != before {
		t.Errorf("modes after Restore:\n%+v\nwant\n%+v", after, before)
	}
}

// TestMakeRawAndInherit: raw mode turns echo, line editing and signals
// off and Restore brings them back; Inherit gives another pty the
// terminal's size, control characters and IUTF8.
func TestMakeRawAndInherit(t *testing.T) {
	t.Parallel()
	_, tty := pty(t)
	fd := int(tty.Fd())
	m := modes(t, tty)
	m.Iflag |= unix.IUTF8
	m.Cc[unix.VERASE] = 0x08
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &m); err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 101}); err != nil {
		t.Fatal(err)
	}
	s := Save(tty)
	if err := s.MakeRaw(); err != nil {
		t.Fatal(err)
	}
	if raw := modes(t, tty); raw.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 || raw.Oflag&unix.OPOST != 0 || raw.Iflag&unix.ICRNL != 0 {
		t.Errorf("raw modes %+v", raw)
	}
	master, other := pty(t)
	if err := s.Inherit(int(master.Fd())); err != nil {
		t.Fatal(err)
	}
	got := modes(t, other)
	ws, err := Size(int(other.Fd()))
	if err != nil || ws.Row != 33 || ws.Col != 101 {
		t.Errorf("size %+v, %v", ws, err)
	}
	if got.Cc[unix.VERASE] != 0x08 || got.Iflag&unix.IUTF8 == 0 || got.Lflag&unix.ICANON == 0 {
		t.Errorf("inherited modes %+v", got)
	}
	if changed, err := s.Restore(); !changed || err != nil {
		t.Fatalf("Restore = %v, %v", changed, err)
	}
	if after := modes(t, tty); after != m {
		t.Errorf("modes after Restore:\n%+v\nwant\n%+v", after, m)
	}
}

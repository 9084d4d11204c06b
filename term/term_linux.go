package term

import (
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reset is written before agentjail's first message to a terminal: SI
// (shift in: back to the G0 character set, after an SO that would print
// letters as line drawing) and SGR 0 (no conceal, colours, blink or
// reverse video). Neither moves the cursor or erases anything.
const Reset = "\x0f\x1b[0m"

// State is a terminal's modes (termios) and line discipline as Save found
// them. A nil State is no terminal: Restore does nothing.
type State struct {
	fd    int
	modes unix.Termios
	ldisc int
}

// Save returns the state of the terminal f is, or nil when f is not an
// *os.File on a terminal.
func Save(f any) *State {
	file, ok := f.(*os.File)
	if !ok || file == nil {
		return nil
	}
	fd := int(file.Fd())
	modes, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	s := &State{fd: fd, modes: *modes, ldisc: -1}
	if ld, err := unix.IoctlGetInt(fd, unix.TIOCGETD); err == nil {
		s.ldisc = ld
	}
	return s
}

// Restore sets the terminal's modes and line discipline back to the saved
// ones where they differ, and reports whether they did. It does so also
// when agentjail runs in the background of that terminal: the change is
// made with SIGTTOU blocked on the calling thread, which the kernel takes
// as leave to change the terminal (drivers/tty/tty_jobctrl.c,
// __tty_check_change) rather than stopping agentjail.
func (s *State) Restore() (changed bool, err error) {
	if s == nil {
		return false, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ttou, old unix.Sigset_t
	bits := uint(unsafe.Sizeof(ttou.Val[0]) * 8)
	ttou.Val[(uint(unix.SIGTTOU)-1)/bits] |= 1 << ((uint(unix.SIGTTOU) - 1) % bits)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &ttou, &old); err != nil {
		return false, err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	if s.ldisc >= 0 {
		if ld, err := unix.IoctlGetInt(s.fd, unix.TIOCGETD); err == nil && ld != s.ldisc {
			changed = true
			if err := unix.IoctlSetPointerInt(s.fd, unix.TIOCSETD, s.ldisc); err != nil {
				return changed, err
			}
		}
	}
	now, err := unix.IoctlGetTermios(s.fd, unix.TCGETS)
	if err != nil {
		return changed, err
	}
	if *now == s.modes {
		return changed, nil
	}
	// TCSETS, not TCSETSW: waiting for the output to drain would wait for
	// ever on a terminal the agent left stopped (IXON and ^S).
	return true, unix.IoctlSetTermios(s.fd, unix.TCSETS, &s.modes)
}

// ResetFirst returns w, writing Reset before its first write when w is a
// terminal.
func ResetFirst(w io.Writer) io.Writer {
	if Save(w) == nil {
		return w
	}
	return &resetFirst{w: w}
}

type resetFirst struct {
	w    io.Writer
	done bool
}

func (r *resetFirst) Write(p []byte) (int, error) {
	if !r.done && len(p) > 0 {
		r.done = true
		if _, err := io.WriteString(r.w, Reset); err != nil {
			return 0, err
		}
	}
	return r.w.Write(p)
}

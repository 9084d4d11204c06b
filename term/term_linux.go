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
	unblock, err := BlockOnThread(unix.SIGTTOU)
	if err != nil {
		return false, err
	}
	defer unblock()
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

// BlockOnThread blocks sig on the calling OS thread, which the caller has
// locked (runtime.LockOSThread), and returns what unblocks it. A job that
// is not the terminal's foreground then gets EIO for a read of it
// (SIGTTIN blocked) and may change its modes (SIGTTOU blocked), rather
// than being stopped; nothing else of the process, and nothing it starts,
// changes.
func BlockOnThread(sig unix.Signal) (func(), error) {
	var set, old unix.Sigset_t
	bits := uint(unsafe.Sizeof(set.Val[0]) * 8)
	set.Val[(uint(sig)-1)/bits] |= 1 << ((uint(sig) - 1) % bits)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return nil, err
	}
	return func() { unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }, nil
}

// MakeRaw puts the terminal in raw mode for a run on a terminal of the
// agent's own: no echo, no line editing, no signals from ^C or ^\, no
// output processing (cfmakeraw(3)); the agent's pty does all of that.
// Restore undoes it.
func (s *State) MakeRaw() error {
	raw := s.modes
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	return unix.IoctlSetTermios(s.fd, unix.TCSETS, &raw)
}

// IsRaw reports whether the terminal is in raw mode now, as far as line
// editing, echo and signals go (what a shell sets back when it takes the
// terminal).
func (s *State) IsRaw() bool {
	now, err := unix.IoctlGetTermios(s.fd, unix.TCGETS)
	return err == nil && now.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) == 0
}

// Fd is the terminal's descriptor.
func (s *State) Fd() int { return s.fd }

// Size returns the window size of the terminal fd is.
func Size(fd int) (*unix.Winsize, error) { return unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ) }

// Inherit gives the pty whose master is fd the size of the terminal s is
// and its control characters and UTF-8 input mode (what ssh's terminal
// modes carry): a pty starts with the kernel's defaults (erase ^?, no
// IUTF8), which need not be the operator's. On a pty master, TCSETS and
// TIOCSWINSZ act on the slave's side (drivers/tty/pty.c), and a new size
// sends the slave's foreground group SIGWINCH.
func (s *State) Inherit(fd int) error {
	m, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	m.Cc = s.modes.Cc
	m.Iflag = m.Iflag&^unix.IUTF8 | s.modes.Iflag&unix.IUTF8
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, m); err != nil {
		return err
	}
	return s.CopySize(fd)
}

// CopySize gives the pty whose master is fd the terminal's window size.
func (s *State) CopySize(fd int) error {
	ws, err := Size(s.fd)
	if err != nil {
		return err
	}
	return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws)
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

// EOFChar is the end-of-file character (VEOF) of the terminal fd is, ^D
// where it has none.
func EOFChar(fd int) byte {
	if t, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil && t.Cc[unix.VEOF] != 0 {
		return t.Cc[unix.VEOF]
	}
	return 4
}

// EndsLine reports whether a read of a canonical terminal that returned p
// ended at the end of a line (a newline, VEOL, VEOL2), not at an
// end-of-file character typed after part of one, which the line
// discipline passes on without itself (`part` then ^D); true for a
// terminal that is not canonical, or unknown.
func EndsLine(fd int, p []byte) bool {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil || t.Lflag&unix.ICANON == 0 || len(p) == 0 {
		return true
	}
	last := p[len(p)-1]
	return last == '\n' || last != 0 && (last == t.Cc[unix.VEOL] || last == t.Cc[unix.VEOL2])
}

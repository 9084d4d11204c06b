package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/term"
)

// Tty runs the agent on a terminal of its own: a pty the exec stage opens
// inside the jail (in the jail's own devpts, so the jail sees no other
// terminal), made the controlling terminal of a session the agent leads
// (setsid, TIOCSCTTY), its master sent back to the supervisor. The run's
// owner hands the master over with Attach; from then on the agent's output
// is read from it as the jail's stdout (bwrap's own stdout and stderr
// then carry only bubblewrap's and the stage's messages, as stderr), what
// the operator types is copied to it, and every signal for the jail also
// goes to the agent's session and to the terminal's foreground job.
type Tty struct {
	// Operator is the operator's terminal (agentjail's stdin, in raw mode)
	// or nil: the pty gets its size and control characters, and its new
	// size on SIGWINCH.
	Operator *term.State
	// Escapes: look for ~. and ~? in what the operator types
	// (term.Escapes).
	Escapes bool
	// Foreground, when set, reports whether the run may read what is
	// typed now: its job is the operator's terminal's foreground. Looked
	// at before each read: in the background, the keys are the shell's.
	Foreground func() bool

	attached chan *agentTerminal
	used     atomic.Bool
}

// NewTty returns a Tty to set in Spec.Tty.
func NewTty(operator *term.State, escapes bool) *Tty {
	return &Tty{Operator: operator, Escapes: escapes, attached: make(chan *agentTerminal, 1)}
}

// agentTerminal is the pty the stage made and the session on it, or why
// it cannot be used.
type agentTerminal struct {
	err    error
	master *os.File // pollable
	// leader is a pidfd of the session's leader: the exec stage, then the
	// agent it became.
	leader, leaderPID int
	rows              int
	cols              int
	resizes           int
}

// ErrNotAPty: what came as the pty's master is not one.
var ErrNotAPty = errors.New("not a pty master")

// Attach takes the master of the pty the exec stage made, as Spec.Control
// received it from sender (execstage.Message.Sender, 0: unknown), checks
// that it is one and that sender leads its session, gives it the
// operator's size and control characters and hands it to the run. It must
// run before the stage is answered (Control's return): the agent's first
// screen is drawn at its size. The file is the supervisor's from then on.
// A pty that cannot be used ends the run (setup_failed), and so does a
// second one.
func (t *Tty) Attach(f *os.File, sender int) {
	defer f.Close()
	if t.used.Swap(true) {
		return
	}
	a, err := t.attach(f, sender)
	if err != nil {
		a = &agentTerminal{err: err}
	}
	t.attached <- a
}

func (t *Tty) attach(f *os.File, sender int) (*agentTerminal, error) {
	// Received descriptors are hostile input: a pty master of a devpts
	// instance (/dev/ptmx is character device 5:2, and so is each
	// instance's ptmx), whose number the kernel tells.
	raw, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*agentTerminal, error) { unix.Close(raw); return nil, err }
	var st unix.Stat_t
	if err := unix.Fstat(raw, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 5 || unix.Minor(st.Rdev) != 2 {
		return fail(fmt.Errorf("%w: mode %o, device %d:%d", ErrNotAPty, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	}
	if _, err := unix.IoctlGetInt(raw, unix.TIOCGPTN); err != nil {
		return fail(fmt.Errorf("%w: TIOCGPTN: %v", ErrNotAPty, err))
	}
	// The session the pty is the controlling terminal of: TIOCGSID on a
	// master answers for its slave, in the caller's pid namespace
	// (drivers/tty/tty_jobctrl.c, tiocgsid). The pid is checked again once
	// the pidfd is open: a session leader that died in between would have
	// taken the pty's session along.
	sid, err := unix.IoctlGetInt(raw, unix.TIOCGSID)
	if err != nil {
		return fail(fmt.Errorf("the pty leads no session: %w", err))
	}
	if sender != 0 && sid != sender {
		return fail(fmt.Errorf("the pty's session is led by pid %d, not by the exec stage (pid %d)", sid, sender))
	}
	leader, err := unix.PidfdOpen(sid, 0)
	if err != nil {
		return fail(fmt.Errorf("pidfd_open(%d), the pty's session leader: %w", sid, err))
	}
	if again, err := unix.IoctlGetInt(raw, unix.TIOCGSID); err != nil || again != sid {
		unix.Close(leader)
		return fail(fmt.Errorf("the pty's session leader %d went away", sid))
	}
	a := &agentTerminal{leader: leader, leaderPID: sid}
	if t.Operator != nil {
		if err := t.Operator.Inherit(raw); err != nil {
			unix.Close(leader)
			return fail(fmt.Errorf("give the pty the terminal's modes: %w", err))
		}
	}
	if ws, err := term.Size(raw); err == nil {
		a.rows, a.cols = int(ws.Row), int(ws.Col)
	}
	// A non-blocking descriptor makes a pollable file: reads and writes
	// can be cut short by a deadline or a Close.
	if err := unix.SetNonblock(raw, true); err != nil {
		unix.Close(leader)
		return fail(err)
	}
	a.master = os.NewFile(uintptr(raw), "pty master")
	return a, nil
}

// control runs an ioctl on the master without making it blocking (Fd
// would).
func (a *agentTerminal) control(f func(fd int)) {
	if rc, err := a.master.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { f(int(fd)) })
	}
}

// resize gives the pty the operator's terminal's new size.
func (a *agentTerminal) resize(op *term.State) {
	if op == nil {
		return
	}
	a.control(func(fd int) {
		if op.CopySize(fd) == nil {
			a.resizes++
		}
	})
}

// signal sends sig to the agent's session's own process group (the
// leader's) and, when another, to the terminal's foreground process group
// (a job an interactive shell in the jail started), and returns the
// targets reached and their groups. The rest of the jail (a background
// job in a third group, a process that called setsid) is the supervisor's
// to reach (signalOthers).
func (a *agentTerminal) signal(procRoot string, sig syscall.Signal) (reached []string, groups []int) {
	if signalPgrp(procRoot, a.leader, a.leaderPID, sig) == nil {
		reached, groups = append(reached, "session"), append(groups, a.leaderPID)
	}
	var sid, fg int
	var err error
	a.control(func(fd int) {
		if sid, err = unix.IoctlGetInt(fd, unix.TIOCGSID); err == nil {
			fg, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		}
	})
	if err != nil || fg <= 0 || fg == sid {
		return reached, groups
	}
	pidfd, err := unix.PidfdOpen(fg, 0)
	if err != nil {
		return reached, groups // its leader is gone: the session's SIGHUP reaches the rest
	}
	defer unix.Close(pidfd)
	var again int
	a.control(func(fd int) { again, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP) })
	if err == nil && again == fg && signalPgrp(procRoot, pidfd, fg, sig) == nil {
		reached, groups = append(reached, "foreground"), append(groups, fg)
	}
	return reached, groups
}

// signalPgrp signals the process group led by pid, which pidfd names.
// PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9) addresses the group of that very
// process; before it, kill(-pid) while the pidfd shows the leader alive
// and leading its group (as sandbox.signalGroup).
func signalPgrp(procRoot string, pidfd, pid int, sig syscall.Signal) error {
	err := unix.PidfdSendSignal(pidfd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if st, err := procs.ReadStat(procRoot, pid); err != nil || st.PGID != pid {
		return errNoGroup
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return err
	}
	return unix.Kill(-pid, sig)
}

// typing copies what the operator types to the agent's terminal until
// it is stopped or the input ends. Escapes are acted on as they are read;
// the bytes go through a queue to a writer of their own, so that ~. is
// read even while an agent that reads nothing has the pty's input buffer
// full, and what does not fit in the queue is dropped, as a terminal's
// line discipline drops input it has no room for. The writer ends with
// the master's closing.
type typing struct {
	in      io.Reader
	fd      int // in's descriptor, polled with wake; -1: in is read as it is
	master  *os.File
	escapes *term.Escapes
	act     *activity
	// onEscape is called with each escape command, on the reader's
	// goroutine.
	onEscape func(cmd byte)
	// onSuspend is called when the agent, in raw mode, took a Ctrl-Z as
	// a suspend of its own and left raw mode (resumeAfterSuspend).
	onSuspend func()
	// fg is Tty.Foreground, or nil.
	fg func() bool
	// ownFD: fd is the reader's own open of the terminal, closed when it
	// ends.
	ownFD bool

	bytes, dropped atomic.Int64
	queue          chan []byte
	wake           [2]int // a pipe that ends the reader's poll
	read           sync.WaitGroup
	resumes        sync.WaitGroup // resumeAfterSuspend: done before the agent's pidfd closes
	mu             sync.Mutex     // guards stopped against resumes.Go
	stopped        bool
}

func startTyping(in io.Reader, master *os.File, escapes bool, fg func() bool, act *activity, onEscape func(byte), onSuspend func()) *typing {
	t := &typing{in: in, fd: -1, master: master, act: act, onEscape: onEscape, onSuspend: onSuspend, fg: fg, queue: make(chan []byte, 256), wake: [2]int{-1, -1}}
	if escapes {
		t.escapes = &term.Escapes{}
	}
	var p [2]int
	if f, ok := in.(*os.File); ok && unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) == nil {
		t.wake = p
		// Not Fd, which would make a non-blocking descriptor blocking,
		// for every process that shares it.
		if rc, err := f.SyscallConn(); err == nil {
			rc.Control(func(u uintptr) { t.fd = int(u) })
		}
		// A terminal gated by Foreground is read through a non-blocking
		// open of its own (not the shell's, whose mode it would change):
		// between poll and read, the shell may have taken what was
		// there, and a blocking read would then wait, out of the wake
		// pipe's reach, for the next key, holding the run's end.
		if t.fd >= 0 && fg != nil {
			if nb, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", t.fd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				t.fd, t.ownFD = nb, true
			}
		}
	}
	go t.write()
	if t.fd >= 0 {
		t.read.Go(t.copy)
	} else {
		go t.copy()
	}
	return t
}

// backgroundWait is how often a reader whose job is in the background
// looks whether it is back in the foreground.
const backgroundWait = 100 * time.Millisecond

// copy is the reader. A descriptor is polled together with the wake pipe,
// so that the reader never sits in a read(2) that would take a keystroke
// typed after the run.
func (t *typing) copy() {
	defer close(t.queue)
	if t.ownFD {
		defer unix.Close(t.fd)
	}
	buf := make([]byte, 4096)
	last := byte('\n') // the last byte passed on
	for {
		var n int
		var err error
		if t.fd < 0 {
			n, err = t.in.Read(buf)
		} else {
			fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}, {Fd: int32(t.wake[0]), Events: unix.POLLIN}}
			if _, perr := unix.Poll(fds, -1); perr != nil && perr != unix.EINTR {
				return
			}
			if fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents == 0 {
				continue
			}
			if t.fg != nil && !t.fg() {
				// The job is in the background: what is typed is the
				// shell's. Looked at again after a while, or woken.
				wake := []unix.PollFd{{Fd: int32(t.wake[0]), Events: unix.POLLIN}}
				if unix.Poll(wake, int(backgroundWait/time.Millisecond)); wake[0].Revents != 0 {
					return
				}
				continue
			}
			n, err = unix.Read(t.fd, buf)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if n == 0 && err == nil {
				err = io.EOF
			}
		}
		if n > 0 {
			t.act.touch() // typing counts as activity
			t.bytes.Add(int64(n))
			var out []byte
			if t.escapes != nil {
				out = t.escapes.Input(nil, buf[:n], t.onEscape)
			} else {
				out = append(out, buf[:n]...)
			}
			if len(out) > 0 {
				last = out[len(out)-1]
				select {
				case t.queue <- out:
				default:
					t.dropped.Add(int64(len(out)))
				}
			}
		}
		if err == io.EOF && t.fg == nil {
			// A stdin that is no terminal ended (--tty with a pipe, or
			// /dev/null): the agent's terminal passes the end on, as
			// script(1) does, its end-of-file character after a line
			// left unfinished flushing that line first.
			eof := []byte{t.eofChar()}
			if last != '\n' {
				eof = append(eof, eof[0])
			}
			select {
			case t.queue <- eof:
			default:
				t.dropped.Add(int64(len(eof)))
			}
		}
		if err != nil {
			return
		}
	}
}

func (t *typing) write() {
	for p := range t.queue {
		raw := slices.Contains(p, suspendKey) && t.canonical() == 0
		if _, err := t.master.Write(p); err != nil {
			for range t.queue {
			}
			return
		}
		if raw {
			t.mu.Lock()
			if !t.stopped {
				t.resumes.Go(t.resumeAfterSuspend)
			}
			t.mu.Unlock()
		}
	}
}

// eofChar is the agent's terminal's end-of-file character.
func (t *typing) eofChar() byte {
	c := byte(4)
	if rc, err := t.master.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { c = term.EOFChar(int(fd)) })
	}
	return c
}

// suspendKey is Ctrl-Z (VSUSP).
const suspendKey = 0x1a

// canonical reports the agent's terminal's ICANON: 1 set, 0 clear, -1
// unknown.
func (t *typing) canonical() int {
	c := -1
	if rc, err := t.master.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if m, err := unix.IoctlGetTermios(int(fd), unix.TCGETS); err == nil {
				c = 0
				if m.Lflag&unix.ICANON != 0 {
					c = 1
				}
			}
		})
	}
	return c
}

// resumeAfterSuspend handles a Ctrl-Z typed to an agent in raw mode. A
// TUI takes it as a suspend of its own: it restores its terminal and
// stops itself with SIGTSTP, which the kernel discards, since the agent's
// process group is orphaned (its session's leader's parent, bwrap's init,
// is in another session; kernel/signal.c, get_signal: a stop signal other
// than SIGSTOP is dropped when is_current_pgrp_orphaned()). Claude Code then
// waits in cooked mode for a SIGCONT nothing sends. When the terminal
// turns canonical within suspendWait, the agent gets that SIGCONT (and
// returns to its screen).
func (t *typing) resumeAfterSuspend() {
	for deadline := time.Now().Add(suspendWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		switch t.canonical() {
		case 1:
			t.onSuspend()
			return
		case -1:
			return
		}
	}
}

// suspendWait bounds the wait for an agent to leave raw mode after Ctrl-Z.
const suspendWait = 2 * time.Second

// stop ends the reader (one that reads no descriptor ends with its input,
// or with agentjail) and waits for it, and for a wait after Ctrl-Z.
func (t *typing) stop() {
	defer func() {
		t.mu.Lock()
		t.stopped = true
		t.mu.Unlock()
		t.resumes.Wait()
	}()
	if t.fd < 0 {
		return
	}
	unix.Write(t.wake[1], []byte{1})
	t.read.Wait()
	unix.Close(t.wake[0])
	unix.Close(t.wake[1])
	t.fd = -1
}

// warnAhead is how long before a wall or idle limit the operator is
// warned: a minute, or a quarter of a shorter limit.
func warnAhead(limit time.Duration) time.Duration { return min(time.Minute, limit/4) }

// terminalRecord is what the record says of the agent's terminal.
func (s *supervisor) terminalRecord() *record.Terminal {
	t := &record.Terminal{}
	if a := s.tty; a != nil {
		t.Rows, t.Cols, t.Resizes = a.rows, a.cols, a.resizes
	}
	if s.typing != nil {
		t.InputBytes, t.InputDropped = s.typing.bytes.Load(), s.typing.dropped.Load()
	}
	t.EndedByEscape = s.escaped
	return t
}

package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/term"
)

// jailStdin returns what the jail gets as stdin in a run with pipes, and a
// func that ends it after the run. Anything but a terminal is handed over
// as it is. A terminal is not: read from a new session (bwrap's
// --new-session), it is outside the terminal's job control, so an agent
// would go on reading it while agentjail is stopped (^Z) or in the
// background (&), taking what the operator types to their own shell, a
// password for sudo included; it could also set its modes, and write to
// it past the filter on stdout and stderr. The jail gets a pty of its own
// instead (still a terminal to the agent: test -t 0, its own modes), and
// what is typed at the operator's terminal reaches it only while the run's
// job is the terminal's foreground: the job of process job (the client of
// a launcher; 0: agentjail itself), which a background reader's SIGTTIN
// would otherwise stop.
func jailStdin(in io.Reader, job int) (io.Reader, func(), error) {
	f, ok := in.(*os.File)
	saved := term.Save(f)
	if !ok || saved == nil {
		return in, func() {}, nil
	}
	fail := func(err error) (io.Reader, func(), error) {
		return nil, nil, fmt.Errorf("cannot give the jail a terminal of its own for stdin: %w; pass --tty (the agent gets a terminal of its own), or give the run another stdin (< /dev/null)", err)
	}
	// A new open file description: non-blocking without touching the
	// shell's.
	tty, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", saved.Fd()), unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	master, slave, err := openPty()
	if err != nil {
		unix.Close(tty)
		return fail(err)
	}
	// The operator's control characters and size; no echo: the
	// operator's terminal echoes what is typed already.
	saved.Inherit(int(master.Fd()))
	if m, err := unix.IoctlGetTermios(int(master.Fd()), unix.TCGETS); err == nil {
		m.Lflag &^= unix.ECHO | unix.ECHONL
		unix.IoctlSetTermios(int(master.Fd()), unix.TCSETS, m)
	}
	r := &stdinRelay{tty: tty, rdev: ttyRdev(tty), master: master, job: job, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(r.run)
	// What the agent writes to its stdin (its terminal's echo is off) is
	// nobody's: read and dropped, so that it never blocks the agent.
	wg.Go(func() { io.Copy(io.Discard, master) })
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(r.done)
			master.Close()
			slave.Close()
			wg.Wait()
			unix.Close(tty)
		})
	}
	return slave, end, nil
}

// stdinRelay copies what is typed at the operator's terminal to the
// jail's pty while the run's job is in the terminal's foreground.
type stdinRelay struct {
	tty    int    // the operator's terminal, read-only, non-blocking
	rdev   uint64 // its device
	master *os.File
	job    int
	done   chan struct{}
}

// relayWait is how often a relay that may not read looks again.
const relayWait = 100 * time.Millisecond

func (r *stdinRelay) run() {
	// Read in the background, the terminal fails with EIO rather than
	// stopping agentjail, its supervision with it: SIGTTIN blocked on
	// this thread alone (a process-wide SIG_IGN would pass to the jail).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if unblock, err := term.BlockOnThread(unix.SIGTTIN); err == nil {
		defer unblock()
	}
	buf := make([]byte, 4096)
	fds := []unix.PollFd{{Fd: int32(r.tty), Events: unix.POLLIN}}
	for {
		select {
		case <-r.done:
			return
		default:
		}
		if !r.foreground() {
			r.sleep()
			continue
		}
		if n, err := unix.Poll(fds, int(relayWait/time.Millisecond)); n <= 0 || err != nil {
			continue
		}
		if fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			r.master.Write(eofOf(r.master))
			return
		}
		// Looked at again just before the read: the job may have left
		// the foreground while poll waited.
		if !r.foreground() {
			continue
		}
		n, err := unix.Read(r.tty, buf)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		case err != nil: // EIO: in the background after all
			r.sleep()
		case n == 0: // ^D at the start of a line
			r.master.Write(eofOf(r.master))
		default:
			out := buf[:n]
			if !term.EndsLine(r.tty, out) {
				// `part` then ^D: the operator's terminal passed the
				// part on without the ^D, which the jail's terminal
				// needs too, or its line waits for a third.
				out = append(out, eofOf(r.master)...)
			}
			if _, err := r.master.Write(out); err != nil {
				return
			}
		}
	}
}

func (r *stdinRelay) sleep() {
	select {
	case <-r.done:
	case <-time.After(relayWait):
	}
}

func (r *stdinRelay) foreground() bool { return inForeground(r.job, r.rdev) }

// inForeground reports whether the run's job may use the terminal whose
// device is rdev: the process group of process job (0: this process) is
// that terminal's foreground one, or the terminal is not that process's
// controlling terminal (no job control applies).
func inForeground(job int, rdev uint64) bool {
	pid := "self"
	if job != 0 {
		pid = strconv.Itoa(job)
	}
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid: comm may hold
	// anything, the fields after its last ")" do not.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	var state byte
	var ppid, pgrp, session, tpgid int
	var ttyNr uint64
	if _, err := fmt.Sscanf(string(data[i+1:]), " %c %d %d %d %d %d", &state, &ppid, &pgrp, &session, &ttyNr, &tpgid); err != nil {
		return false
	}
	if ttyNr != rdev {
		return true
	}
	return pgrp == tpgid
}

// ttyRdev is the device number of the terminal fd is, as /proc/PID/stat's
// tty_nr gives it.
func ttyRdev(fd int) uint64 {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	return uint64(unix.Major(st.Rdev))<<8 | uint64(unix.Minor(st.Rdev)&0xff) | uint64(unix.Minor(st.Rdev)&^0xff)<<12
}

// eofOf is the end-of-file character of the pty whose master is m.
func eofOf(m *os.File) []byte { return []byte{term.EOFChar(int(m.Fd()))} }

// openPty returns a new pty's master and slave, neither anyone's
// controlling terminal.
// The master is non-blocking, read and written through Go's poller, so
// that closing it ends what waits on it.
func openPty() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, err
	}
	// TIOCGPTPEER (Linux 4.13): the slave, opened by the master's
	// descriptor, not by a path in /dev/pts.
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		unix.Close(m)
		return nil, nil, fmt.Errorf("TIOCGPTPEER: %w", errno)
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(s, "pty"), nil
}

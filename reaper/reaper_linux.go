package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

var (
	mu       sync.Mutex
	running  bool
	children = map[int]*child{}
	orphans  uint64
	onOrphan func(pid int, ws syscall.WaitStatus)
	sigchld  chan os.Signal
)

// child is a process started through Start. Its entry stays until its
// waiter takes the status, so Wait may come after the reaping; once reaped,
// a new process that reuses the pid is an orphan, not this child.
type child struct {
	status chan syscall.WaitStatus
	reaped bool
}

// ErrNotStarted is returned by Start and Wait before Begin.
var ErrNotStarted = errors.New("reaper not started")

// Begin makes this process a child subreaper and starts the one goroutine
// that reaps. Calling it twice is harmless.
func Begin() error {
	mu.Lock()
	defer mu.Unlock()
	if running {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	sigchld = make(chan os.Signal, 64)
	signal.Notify(sigchld, syscall.SIGCHLD)
	running = true
	go loop()
	// A child may have exited before SIGCHLD was caught.
	sigchld <- syscall.SIGCHLD
	return nil
}

// OnOrphan sets a function called (from the reaping goroutine) for every
// reaped process that was not started through Start.
func OnOrphan(f func(pid int, ws syscall.WaitStatus)) {
	mu.Lock()
	onOrphan = f
	mu.Unlock()
}

// Orphans returns how many processes not started through Start were reaped.
func Orphans() uint64 {
	mu.Lock()
	defer mu.Unlock()
	return orphans
}

func loop() {
	for range sigchld {
		reapAll()
	}
}

// reapAll collects every zombie child. The lock is taken before wait4 so a
// child reaped here is always registered already (Start holds the lock
// across cmd.Start and the registration).
func reapAll() {
	for {
		var ws syscall.WaitStatus
		mu.Lock()
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			mu.Unlock()
			continue
		}
		if pid <= 0 || err != nil {
			mu.Unlock()
			return
		}
		c, ours := children[pid]
		ours = ours && !c.reaped
		f := onOrphan
		if ours {
			c.reaped = true
			c.status <- ws // buffered: never blocks
		} else {
			orphans++
		}
		mu.Unlock()
		if !ours && f != nil {
			f(pid, ws)
		}
	}
}

// Start starts cmd and registers it, so its status goes to Wait.
func Start(cmd *exec.Cmd) error {
	mu.Lock()
	defer mu.Unlock()
	if !running {
		return ErrNotStarted
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	children[cmd.Process.Pid] = &child{status: make(chan syscall.WaitStatus, 1)}
	return nil
}

// Wait waits for a command started with Start and returns its wait status.
// It then calls cmd.Wait to release the command's resources (copying
// goroutines, pipes); the ECHILD that returns is expected and ignored.
func Wait(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	ch, err := Done(cmd)
	if err != nil {
		return 0, err
	}
	ws := <-ch
	Release(cmd)
	return ws, nil
}

// Done returns a channel that delivers cmd's wait status once, for use in
// a select; follow it with Release(cmd).
func Done(cmd *exec.Cmd) (<-chan syscall.WaitStatus, error) {
	mu.Lock()
	defer mu.Unlock()
	if cmd.Process == nil {
		return nil, errors.New("reaper: command not started")
	}
	c, ok := children[cmd.Process.Pid]
	if !ok {
		return nil, fmt.Errorf("reaper: pid %d was not started through reaper.Start", cmd.Process.Pid)
	}
	return c.status, nil
}

// Release forgets cmd and calls cmd.Wait for its cleanup (the exit status is
// already known; the ECHILD cmd.Wait meets is expected).
func Release(cmd *exec.Cmd) {
	mu.Lock()
	if c, ok := children[cmd.Process.Pid]; ok && c.reaped {
		delete(children, cmd.Process.Pid)
	}
	mu.Unlock()
	_ = cmd.Wait()
}

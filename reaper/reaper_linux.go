package reaper

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	mu       sync.Mutex
	running  bool
	children = map[int]*child{}
	orphans  uint64
	onOrphan func(pid int, ws syscall.WaitStatus)
	// wake tells the reaping goroutine, parked while this process has no
	// child at all, that Start made one.
	wake = make(chan struct{}, 1)
)

// child is a process started through Start. Its entry stays until its
// waiter takes the status, so Wait may come after the reaping; once reaped,
// a new process that reuses the pid is an orphan, not this child.
type child struct {
	status chan syscall.WaitStatus
	reaped bool
}

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
	if err := defaultSIGCHLD(); err != nil {
		return err
	}
	running = true
	go loop()
	return nil
}

// defaultSIGCHLD sets SIGCHLD's disposition to SIG_DFL. The Go runtime
// installs a handler for every signal; for SIGCHLD that means each exit
// below us interrupts a thread to run it, for nothing, since loop waits in
// waitid. With SIG_DFL the kernel drops SIGCHLD when it is sent
// (kernel/signal.c: sig_handler_ignored) yet still makes zombies and
// wakes waitid — unlike SIG_IGN, which would reap children before their
// status could be read (wait(2), NOTES). Measured on a steady stream of
// orphans: it halves init's CPU per orphan. The runtime is bypassed, so
// os/signal.Notify of SIGCHLD no longer works in this process: the reaper
// owns SIGCHLD.
func defaultSIGCHLD() error {
	var act [8]uint64    // struct sigaction, all zero: SIG_DFL, no flags; larger than any arch's
	const sigsetSize = 8 // _NSIG/8: 64 signals (mips, with 128, is not supported)
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0)
	if errno != 0 {
		return fmt.Errorf("rt_sigaction(SIGCHLD, SIG_DFL): %w", errno)
	}
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

// loop sleeps in waitid(2) until a child has exited — WNOWAIT leaves it a
// zombie, to be reaped under the lock — and parks when there is no child
// at all: without a child there can be no orphan either (every orphan
// descends from a child), so only Start can end the parking.
//
// Why not SIGCHLD through os/signal, the usual way: profiled against tini
// reaping 20 000 orphans that exit one after another, each SIGCHLD cost
// a signal-handler interrupt and two goroutine wake-ups, about 50 µs of
// CPU per orphan where tini spends 15. Sleeping in waitid costs one
// context switch per batch, as tini's sigtimedwait does.
//
// Each wait for "any child" walks the list of children up to the first
// zombie (kernel/exit.c: do_wait_thread), so with thousands of children a
// batch ending in a wait4 that finds none costs one extra walk. Two
// alternatives were measured and dropped: reaping just the peeked pid (a
// direct lookup) is no faster, since every peek is such a walk as well;
// reaping in the sleeping waitid itself saves a walk per batch but reaps
// before the lock, so telling a child from an orphan that reused its pid
// needs a pidfd per child — more code for a gain lost in the noise here.
//
// Why the Gosched: a goroutine that keeps the same scheduling tick for
// 10 ms counts as hogging its P even when it only cycles through system
// calls, so sysmon forcibly retakes the P and resets its own polling to
// 20 µs — 8 000 sysmon wake-ups a second, as much CPU as the reaping
// itself (runtime/proc.go: retake, forcePreemptNS). Yielding every 5 ms
// starts a new tick and lets sysmon back off to its 10 ms sleep.
func loop() {
	yielded := time.Now()
	for {
		var info unix.Siginfo
		switch err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil); err {
		case nil:
			reapAll()
			if time.Since(yielded) > 5*time.Millisecond {
				runtime.Gosched()
				yielded = time.Now()
			}
		case unix.ECHILD:
			<-wake
		case unix.EINTR:
		default:
			panic(fmt.Sprintf("reaper: waitid: %v", err)) // only EINVAL: a bug here
		}
	}
}

// reapAll collects up to batchMax zombie children. The lock is held across
// the wait4 calls so a child reaped here is always registered already
// (Start holds the lock across cmd.Start and the registration). It is
// taken once per batch, not per wait4, and a batch is bounded so that
// neither Start nor loop's Gosched waits for a whole burst: a goroutine
// that runs 10 ms without yielding is preempted by sysmon, which then
// polls every 20 µs again (see loop). onOrphan runs after the lock is
// dropped, so it may call back into the package.
func reapAll() {
	var lost []reaped
	mu.Lock()
	f := onOrphan
	for range batchMax {
		var ws syscall.WaitStatus
		pid, err := wait4NoHang(&ws)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			break // 0: children left but none exited; ECHILD: no children
		}
		if c, ok := children[pid]; ok && !c.reaped {
			c.reaped = true
			c.status <- ws // buffered: never blocks
			continue
		}
		orphans++
		if f != nil {
			lost = append(lost, reaped{pid, ws})
		}
	}
	mu.Unlock()
	for _, r := range lost {
		f(r.pid, r.ws)
	}
}

// wait4NoHang is wait4(-1, ws, WNOHANG) as a raw system call: with WNOHANG
// it never blocks, so the runtime's bookkeeping around a system call that
// might (entersyscall, exitsyscall: handing the P to another thread) is
// pure cost, paid once per orphan.
func wait4NoHang(ws *syscall.WaitStatus) (int, error) {
	pid, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(ws)), syscall.WNOHANG, 0, 0, 0)
	if e != 0 {
		return int(pid), e
	}
	return int(pid), nil
}

// batchMax bounds a batch: 64 reaps take well under a millisecond.
const batchMax = 64

type reaped struct {
	pid int
	ws  syscall.WaitStatus
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
	select {
	case wake <- struct{}{}:
	default: // a wake-up is pending already
	}
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

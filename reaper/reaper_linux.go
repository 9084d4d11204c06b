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
	// autoreap: the kernel releases every child at exit (BeginAutoreap);
	// no loop runs, and each started child is watched through its pidfd.
	autoreap bool
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
	pidfd  int // ours, -1 when the kernel gives none (before Linux 5.3)
}

// Begin makes this process a child subreaper and starts the one goroutine
// that reaps: every status passes through it, so orphans are counted
// (Orphans) and can be logged (OnOrphan). Calling it twice is harmless;
// the first call's mode stays.
func Begin() error { return begin(false) }

// BeginAutoreap is Begin where the kernel releases every child when it
// exits: no zombie is made and no wait4 is needed (SA_NOCLDWAIT, sigaction(2)),
// so reaping costs this process nothing per orphan. A child started through
// Start gets its status from its pidfd, which keeps it after the release
// (PIDFD_INFO_EXIT, Linux 6.15; see kernelKeepsExitStatus). Orphans are not
// seen at all: OnOrphan is never called and Orphans stays 0. Where the
// kernel cannot do this, BeginAutoreap is Begin; Autoreaping tells which.
func BeginAutoreap() error { return begin(true) }

// Autoreaping reports whether the kernel reaps for this process
// (BeginAutoreap took effect).
func Autoreaping() bool {
	mu.Lock()
	defer mu.Unlock()
	return autoreap
}

func begin(auto bool) error {
	mu.Lock()
	defer mu.Unlock()
	if running {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	if auto && kernelKeepsExitStatus() && setSIGCHLD(saNoCldWait) == nil {
		// Zombies made before the flag was set are not released by it.
		for {
			if pid, _ := unix.Wait4(-1, nil, unix.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		autoreap, running = true, true
		return nil
	}
	if err := setSIGCHLD(0); err != nil {
		return err
	}
	running = true
	go loop()
	return nil
}

// saNoCldWait is SA_NOCLDWAIT (asm-generic/signal.h; x86 and arm64 alike).
const saNoCldWait = 2

// setSIGCHLD sets SIGCHLD's disposition to SIG_DFL with flags (0 or
// SA_NOCLDWAIT). The Go runtime installs a handler for every signal; for
// SIGCHLD that means each exit below us interrupts a thread to run it, for
// nothing, since loop waits in wait4. With SIG_DFL the kernel drops
// SIGCHLD when it is sent (kernel/signal.c: sig_handler_ignored) yet still
// makes zombies and wakes wait4 — unlike SIG_IGN, which would reap children
// before their status could be read (wait(2), NOTES), and which a command
// would inherit across exec, where exec clears every signal's flags,
// SA_NOCLDWAIT among them (kernel/signal.c: flush_signal_handlers).
// Measured on a steady stream of orphans: SIG_DFL halves init's CPU per
// orphan. The runtime is bypassed, so os/signal.Notify of SIGCHLD no
// longer works in this process: the reaper owns SIGCHLD.
func setSIGCHLD(flags uint64) error {
	// struct sigaction as the kernel takes it: handler (0: SIG_DFL),
	// flags, restorer, mask; larger than any arch's.
	act := [8]uint64{1: flags}
	const sigsetSize = 8 // _NSIG/8: 64 signals (mips, with 128, is not supported)
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0)
	if errno != 0 {
		return fmt.Errorf("rt_sigaction(SIGCHLD, SIG_DFL, %#x): %w", flags, errno)
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

// loop sleeps in wait4(-1) and reaps whatever it returns; it parks when
// there is no child at all: without a child there can be no orphan either
// (every orphan descends from a child), so only Start can end the parking.
//
// Why not SIGCHLD through os/signal, the usual way: each SIGCHLD costs a
// signal-handler interrupt and two goroutine wake-ups per orphan, several
// times what tini spends (BenchmarkReaping, docs/benchmarks.md). A
// blocking wait4 costs one system call per orphan and one context switch
// per batch.
//
// Why a blocking wait4 rather than waitid(WNOWAIT) to sleep and then
// wait4(WNOHANG) until none is left: each wait for "any child" walks the
// list of children up to the first zombie (kernel/exit.c:
// do_wait_thread), and the wait that finds none walks all of it. The
// peek-then-drain loop ends every batch with two such full walks (the
// WNOHANG that returns 0, the waitid that then goes to sleep); a blocking
// wait4 makes one, the one before it sleeps, as tini's loop does, and
// each such walk holds tasklist_lock, which every exiting child needs
// (BenchmarkReaping measured the two: docs/benchmarks.md).
//
// The price: the status is taken before the lock, so a registered child
// must be told from an orphan that held the same pid (see deliver).
//
// Why the Gosched: a goroutine that keeps the same scheduling tick for
// 10 ms counts as hogging its P even when it only cycles through system
// calls, so sysmon forcibly retakes the P and resets its own polling to
// its shortest (runtime/proc.go: retake, forcePreemptNS), waking as often
// as the reaping itself works. Yielding every 5 ms starts a new tick and
// lets sysmon back off to its 10 ms sleep.
func loop() {
	yielded := time.Now()
	for {
		var ws syscall.WaitStatus
		switch pid, err := syscall.Wait4(-1, &ws, 0, nil); err {
		case nil:
			deliver(pid, ws)
			if time.Since(yielded) > 5*time.Millisecond {
				runtime.Gosched()
				yielded = time.Now()
			}
		case syscall.ECHILD:
			<-wake
		case syscall.EINTR:
		default:
			panic(fmt.Sprintf("reaper: wait4: %v", err)) // only EINVAL/EFAULT: a bug here
		}
	}
}

// deliver hands a reaped status to the waiter of the child it belongs to,
// or counts an orphan. A reaped pid that is registered is that child —
// unless the child is still alive and the reaped process was an orphan
// that held the pid before it (pids are reused). The child's pidfd settles
// it: a pidfd outlives its process, and only while the process is not yet
// reaped does it take signal 0 (pidfd_send_signal(2)). Any failure counts
// as reaped — ESRCH, but also a seccomp profile that denies the call
// (EPERM, ENOSYS): the child's status must reach its waiter, or Init
// would wait for ever. onOrphan runs after mu is dropped, so it may call
// back into the package.
//
// A child whose exec fails inside cmd.Start (Go then waits for it itself)
// may be reaped here first: Start holds mu, so deliver waits, finds the
// pid unregistered, and counts an orphan — a miscount in the verbose log
// and Orphans, nothing more.
func deliver(pid int, ws syscall.WaitStatus) {
	mu.Lock()
	if c, ok := children[pid]; ok && !c.reaped && (c.pidfd < 0 || unix.PidfdSendSignal(c.pidfd, 0, nil, 0) != nil) {
		c.reaped = true
		c.status <- ws // buffered: never blocks
		mu.Unlock()
		return
	}
	orphans++
	f := onOrphan
	mu.Unlock()
	if f != nil {
		f(pid, ws)
	}
}

// Start starts cmd and registers it, so its status goes to Wait. It asks
// for a pidfd of the child (deliver needs one), or duplicates the one the
// caller asked for in cmd.SysProcAttr.
func Start(cmd *exec.Cmd) error {
	mu.Lock()
	defer mu.Unlock()
	if !running {
		return ErrNotStarted
	}
	pidfd, own := -1, true
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.PidFD == nil {
		cmd.SysProcAttr.PidFD = &pidfd
		defer func() { cmd.SysProcAttr.PidFD = nil }()
	} else {
		own = false
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if !own {
		if fd, err := unix.FcntlInt(uintptr(*cmd.SysProcAttr.PidFD), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			pidfd = fd
		}
	}
	c := &child{status: make(chan syscall.WaitStatus, 1), pidfd: pidfd}
	children[cmd.Process.Pid] = c
	if autoreap {
		// Nothing waits for it: its pidfd is the only way to its status.
		// Go asks clone for one whenever SysProcAttr.PidFD is set, and
		// every kernel that can autoreap gives it; only a failed dup of the
		// caller's (EMFILE) gets here.
		if pidfd < 0 {
			delete(children, cmd.Process.Pid)
			cmd.Process.Kill()
			cmd.Wait() // returns once it is gone (ECHILD), and frees its pipes
			return fmt.Errorf("reaper: no pidfd for pid %d, so its exit status could not be known; it was killed", cmd.Process.Pid)
		}
		go watch(c)
		return nil
	}
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
		if c.pidfd >= 0 {
			unix.Close(c.pidfd)
		}
	}
	mu.Unlock()
	_ = cmd.Wait()
}

package reaper

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// InitOptions configure Init.
type InitOptions struct {
	// Grace is the time the processes left when the command exits get
	// between SIGTERM and SIGKILL.
	Grace time.Duration
	// ChildOnly forwards signals to the command alone, not to its process
	// group (tini's default without -g).
	ChildOnly bool
	// Logf, when set, reports each forwarded signal, reaped orphan and
	// ended straggler (verbose mode). Without it, orphans are left to the
	// kernel to release where it can (BeginAutoreap): none is seen.
	Logf func(format string, args ...any)
	// Warnf reports what goes wrong without stopping init (a signal that
	// could not be forwarded); nil discards it.
	Warnf func(format string, args ...any)
	// Sweep, when set, runs when the command has started and then every
	// SweepEvery while it runs: the hook that ends processes of runs whose
	// supervisor died.
	Sweep      func()
	SweepEvery time.Duration
	// Ignored are signals (bit n-1 for signal n) ignored when agentjail
	// started, before the Go runtime put handlers over them: ignored
	// again, not forwarded, so that the command inherits them ignored.
	Ignored uint64
	// Proc is the procfs root where descendants are found when init is not
	// PID 1 ("/proc" when empty).
	Proc string
}

// Init runs cmd as an init process: it makes this process a subreaper
// (already the case as PID 1), starts cmd in its own process group — in
// the terminal's foreground when stdin is the terminal and init holds it
// — forwards every signal it receives to that group, reaps every zombie
// (or has the kernel release every child at exit, see BeginAutoreap), and
// when cmd exits ends what cmd left behind (EndDescendants).
//
// It returns cmd's exit code, 128+n when cmd died by signal n. The error
// is set when cmd could not be started (the code is then 0), or when
// processes survived SIGKILL (the code is still cmd's).
func Init(cmd *exec.Cmd, o InitOptions) (int, error) {
	logf, warnf := orNop(o.Logf), orNop(o.Warnf)
	// Notify before the command starts, so no signal sent to init in
	// between is lost: the buffered channel keeps it until it can be
	// forwarded.
	sigs := make(chan os.Signal, 64)
	passOn, ignored := forwarded(o.Ignored)
	if len(ignored) > 0 { // (with none, Ignore would ignore every signal)
		signal.Ignore(ignored...) // until the command has started: it inherits them so
	}
	signal.Notify(sigs, passOn...)
	defer signal.Stop(sigs)
	if o.Logf != nil {
		OnOrphan(func(pid int, ws syscall.WaitStatus) {
			logf("reaped orphan pid %d (%s)", pid, describe(ws))
		})
		defer OnOrphan(nil)
	}
	// Verbose init logs every orphan, so it must see each one: it reaps
	// them itself. Otherwise the kernel does (BeginAutoreap).
	begin := BeginAutoreap
	if o.Logf != nil {
		begin = Begin
	}
	if err := begin(); err != nil {
		return 0, err
	}

	pidfd := -1
	attr := syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
		attr.Setpgid, attr.PidFD = true, &pidfd
	}
	if fd, ok := foreground(cmd.Stdin); ok {
		// Go's child calls tcsetpgrp with signals blocked, so its SIGTTOU
		// never fires (syscall/exec_linux.go); doing it in the child
		// before exec also means the command never runs in the background
		// (tini's isolate_child).
		attr.Foreground, attr.Ctty = true, fd
	}
	cmd.SysProcAttr = &attr
	if err := Start(cmd); err != nil {
		return 0, err
	}
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	// Init is in the background from now on when the command took the
	// terminal; with TOSTOP set a write to it would stop init (tty_ioctl(4)).
	// Ignored only now: an ignored signal stays ignored across exec, and
	// the command must start with the default dispositions (tini restores
	// them in its child; Go resets only the signals it handles).
	signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	// The command ignores those ignored at start as it inherited them,
	// unless it handles them itself; init forwards them as the others, as
	// tini does (a command that installs a SIGTERM handler still gets
	// docker stop's).
	if len(ignored) > 0 {
		signal.Notify(sigs, ignored...)
	}
	logf("started %s as pid %d", cmd.Path, cmd.Process.Pid)

	done, err := Done(cmd)
	if err != nil {
		return 0, err
	}
	stop, swept := make(chan struct{}), make(chan struct{})
	// A sweep under way when the command has ended finishes, and logs
	// what it killed, before init exits (each sweep is bounded).
	defer func() { close(stop); <-swept }()
	if o.Sweep == nil || o.SweepEvery <= 0 {
		close(swept)
	} else {
		// Its own goroutine: a slow sweep must not delay signals. The
		// first runs at once: what a previous life of the container left
		// is there from the start.
		go func() {
			defer close(swept)
			t := time.NewTicker(o.SweepEvery)
			defer t.Stop()
			for {
				o.Sweep()
				select {
				case <-t.C:
				case <-stop:
					return
				}
			}
		}()
	}
	fwd := func(s os.Signal) {
		if err := forward(pidfd, cmd.Process.Pid, s.(syscall.Signal), !o.ChildOnly, logf); err != nil {
			warnf("%v", err)
		}
	}
	var ws syscall.WaitStatus
wait:
	for {
		select {
		case s := <-sigs:
			fwd(s)
		case ws = <-done:
			break wait
		}
	}
	Release(cmd)
	code := ExitCode(ws)
	logf("pid %d %s", cmd.Process.Pid, describe(ws))

	// Signals that arrive from now on still go to the command's group
	// (which may outlive its leader); a SIGTERM or SIGINT also cuts the
	// stragglers' grace short.
	hurry := make(chan os.Signal, 1)
	go func() {
		for {
			select {
			case s := <-sigs:
				fwd(s)
				if s == syscall.SIGTERM || s == syscall.SIGINT {
					select {
					case hurry <- s:
					default:
					}
				}
			case <-stop:
				return
			}
		}
	}()
	err = EndDescendants(o.Grace, o.Proc, hurry, logf)
	logf("exiting with %d; reaped %d orphans", code, Orphans())
	return code, err
}

func orNop(f func(string, ...any)) func(string, ...any) {
	if f == nil {
		return func(string, ...any) {}
	}
	return f
}

// ExitCode is the shell's convention for a wait status: the exit code, or
// 128+n for death by signal n.
func ExitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exited with %d", ws.ExitStatus())
}

// forwarded lists the signals init passes on: every catchable one but
// SIGCHLD (it drives reaping), SIGURG (the Go runtime's preemption
// signal), SIGTTIN and SIGTTOU (ignored, see Init), 32 and 33 (glibc's
// SIGCANCEL and SIGSETXID, which cgo's threads need: nptl(7)), and those
// ignored when init started, which stay ignored so the command inherits
// that (nohup(1)'s intent; os/signal: Notify would install a handler).
// Those are the Go runtime's own record (SIGHUP, SIGINT) and the set
// ignoredAtStart (bit n-1 for signal n) agentjail recorded before its
// runtime started (internal/sigstart): ignore lists the latter, ignored
// again until the command has inherited them, then forwarded too (Init).
// As PID 1, a signal without a handler is dropped by the
// kernel (pid_namespaces(7)), so SIGTERM and SIGINT reach the command
// only because they are listed here.
func forwarded(ignoredAtStart uint64) (forward, ignore []os.Signal) {
	for s := syscall.Signal(1); s <= 64; s++ {
		switch {
		case s == syscall.SIGKILL, s == syscall.SIGSTOP, s == syscall.SIGCHLD, s == syscall.SIGURG,
			s == syscall.SIGTTIN, s == syscall.SIGTTOU, s == 32, s == 33:
		case signal.Ignored(s):
		case ignoredAtStart&(1<<(s-1)) != 0:
			ignore = append(ignore, s)
		default:
			forward = append(forward, s)
		}
	}
	return forward, ignore
}

// forward sends sig to the command's process group (or the command
// alone) through its pidfd, so a pid reused after the group is gone is
// never hit. PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9) reaches the group
// whose id is the pidfd's pid even after its leader was reaped; older
// kernels refuse the flag with EINVAL and get kill(-pgid). ESRCH (nothing
// left to signal) is not an error.
func forward(pidfd, pid int, sig syscall.Signal, group bool, logf func(string, ...any)) error {
	flags, target := 0, fmt.Sprintf("pid %d", pid)
	if group {
		flags, target = unix.PIDFD_SIGNAL_PROCESS_GROUP, fmt.Sprintf("process group %d", pid)
	}
	var err error = unix.ESRCH
	if pidfd >= 0 {
		err = unix.PidfdSendSignal(pidfd, sig, nil, flags)
	}
	if pidfd < 0 || (group && err == unix.EINVAL) {
		if group {
			pid = -pid
		}
		err = unix.Kill(pid, sig)
	}
	switch err {
	case nil:
		logf("forwarded %s to %s", unix.SignalName(sig), target)
	case unix.ESRCH:
		logf("%s not forwarded: %s is gone", unix.SignalName(sig), target)
	default:
		return fmt.Errorf("forward %s to %s: %w", unix.SignalName(sig), target, err)
	}
	return nil
}

// foreground returns stdin's descriptor when it is a terminal whose
// foreground process group is init's: the command then gets the terminal.
// A terminal init does not hold in the foreground (init started with &)
// is not taken from its owner.
func foreground(stdin io.Reader) (int, bool) {
	f, ok := stdin.(*os.File)
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return fd, err == nil && pgrp == unix.Getpgrp()
}

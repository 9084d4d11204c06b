package reaper

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentjail/agentjail/procs"
	"golang.org/x/sys/unix"
)

// KillWait bounds the wait after SIGKILL. A process in uninterruptible
// sleep (state D: a hung NFS or FUSE mount, a stuck driver) dies only when
// its system call returns; init reports it rather than hang on it forever.
const KillWait = 5 * time.Second

// EndDescendants ends every process left below this one: SIGTERM, up to
// grace for them to exit, then SIGKILL and up to KillWait. It returns once
// none is left, or ErrSurvivors naming those still there after KillWait.
//
// As PID 1 every process of the pid namespace is a descendant: it signals
// them all with kill(-1) (kill(2)) and knows they are gone when it has no
// child left, since orphans are re-parented to it. Otherwise it walks the
// process tree in proc (the procfs root, "/proc" when empty) from this
// process down, and signals each descendant through a pidfd.
//
// A signal on hurry (init got SIGTERM or SIGINT during the grace) cuts the
// grace short. logf, when set, reports each step.
func EndDescendants(grace time.Duration, proc string, hurry <-chan os.Signal, logf func(string, ...any)) error {
	var t tree = &namespace{}
	if os.Getpid() != 1 {
		if proc == "" {
			proc = "/proc"
		}
		self, err := os.Readlink(filepath.Join(proc, "self"))
		if err != nil {
			return fmt.Errorf("find descendants: %w", err)
		}
		if self != strconv.Itoa(os.Getpid()) {
			return fmt.Errorf("find descendants in %s: %w (mount this namespace's procfs there)", proc, ErrForeignProc)
		}
		t = &subtree{proc: proc, termed: map[identity]bool{}}
	}

	return end(t, grace, KillWait, hurry, logf)
}

// end is EndDescendants' escalation on any tree.
func end(t tree, grace, killWait time.Duration, hurry <-chan os.Signal, logf func(string, ...any)) error {
	logf = orNop(logf)
	deadline := time.Now().Add(grace)
	pause := backoff()
term:
	for {
		left, err := t.signal(syscall.SIGTERM, true, logf)
		if err != nil || left == 0 {
			return err
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case s := <-hurry:
			logf("received %s during the grace period: SIGKILL now", unix.SignalName(s.(syscall.Signal)))
			break term
		case <-time.After(min(pause(), time.Until(deadline))):
		}
	}
	deadline = time.Now().Add(killWait)
	pause = backoff()
	for {
		left, err := t.signal(syscall.SIGKILL, false, logf)
		if err != nil || left == 0 {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w, %s after SIGKILL: %s", ErrSurvivors, killWait, t.describe())
		}
		time.Sleep(pause())
	}
}

// backoff returns successive polling pauses: short at first, since most
// processes exit at once on SIGTERM, then longer, since a walk of /proc
// reads every process's stat.
func backoff() func() time.Duration {
	d := time.Millisecond
	return func() time.Duration {
		cur := d
		d = min(2*d, 50*time.Millisecond)
		return cur
	}
}

// tree is the set of processes init must end.
type tree interface {
	// signal sends sig to every live process of the tree (with onlyNew, to
	// those not signalled before) and returns how many were alive.
	signal(sig syscall.Signal, onlyNew bool, logf func(string, ...any)) (int, error)
	// describe names what is left, for the error when some survive.
	describe() string
}

// namespace is the whole pid namespace of a PID 1.
type namespace struct {
	// signalled: kill(-1, sig) was sent already. It cannot tell new
	// processes from old, so it is sent once with onlyNew: a second
	// SIGTERM would reach processes told once (many read it as "force").
	signalled map[syscall.Signal]bool
}

func (n *namespace) signal(sig syscall.Signal, onlyNew bool, logf func(string, ...any)) (int, error) {
	if !hasChildren() {
		return 0, nil
	}
	if onlyNew && n.signalled[sig] {
		return 1, nil
	}
	if n.signalled == nil {
		n.signalled = map[syscall.Signal]bool{}
	}
	if !n.signalled[sig] {
		logf("sending %s to every process of the pid namespace", unix.SignalName(sig))
	}
	n.signalled[sig] = true
	if err := syscall.Kill(-1, sig); err != nil && err != syscall.ESRCH {
		return 1, fmt.Errorf("kill(-1, %s): %w", unix.SignalName(sig), err)
	}
	return 1, nil
}

func (*namespace) describe() string { return "processes remain in this pid namespace" }

// hasChildren reports whether this process has a child, running or zombie.
// WNOWAIT leaves any zombie to the reaping goroutine (wait(2)).
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != unix.ECHILD
}

// subtree is this process's descendants, found in procfs.
type subtree struct {
	proc   string
	termed map[identity]bool
	last   []procs.Held
}

// identity tells a process from a later one with the same pid.
type identity struct {
	pid   int
	start uint64
}

func (t *subtree) signal(sig syscall.Signal, onlyNew bool, logf func(string, ...any)) (int, error) {
	ps, err := descendants(t.proc)
	if err != nil {
		return 0, err
	}
	defer procs.Release(ps)
	if len(ps) == 0 && hasChildren() {
		// Only zombies are left: the reaper collects them, and init must
		// not exit first (its orphaned zombies would outlive it).
		return 1, nil
	}
	t.last = t.last[:0]
	for _, p := range ps {
		t.last = append(t.last, p)
		id := identity{p.PID, p.Start}
		if onlyNew && t.termed[id] {
			continue
		}
		t.termed[id] = true
		logf("sending %s to pid %d (%s)", unix.SignalName(sig), p.PID, p.Comm)
		if err := unix.PidfdSendSignal(p.FD, sig, nil, 0); err != nil && err != unix.ESRCH {
			return len(ps), fmt.Errorf("signal pid %d (%s): %w", p.PID, p.Comm, err)
		}
	}
	return len(ps), nil
}

func (t *subtree) describe() string {
	if len(t.last) == 0 {
		return "zombie children not yet reaped"
	}
	var s []string
	for _, p := range t.last {
		s = append(s, fmt.Sprintf("pid %d (%s) state %c", p.PID, p.Comm, p.State))
	}
	return strings.Join(s, ", ")
}

// descendants returns the live processes below this one in proc's process
// tree, each held by a pidfd (procs.Below). The caller closes the pidfds
// (procs.Release).
func descendants(proc string) ([]procs.Held, error) {
	return procs.Below(proc, os.Getpid(), -1, procs.Since{})
}

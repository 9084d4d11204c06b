package supervise

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sandbox is the jail's first process: bwrap's child, PID 1 of the jail's
// pid namespace. Once it has called setsid() (bwrap's --new-session) its
// pid is also the process group of the agent, so the group is signalled
// through its pidfd.
type sandbox struct {
	pid   int
	pidfd int
}

// openSandbox takes a pidfd on pid, then checks that the process behind it
// is bwrap's child and carries this run's marker. The check comes after
// the pidfd is open and the pidfd is then checked alive, so the /proc data
// read belongs to the process the pidfd names, never to a reused pid.
func openSandbox(procRoot string, pid, bwrapPID int, runID string) (*sandbox, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	p, err := readProc(procRoot, pid)
	// The environment of a process that is not dumpable (a sealed jail's
	// sandbox, in its own user namespace) is readable by root only; then
	// the parent check stands alone.
	env, envErr := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "environ"))
	if err == nil {
		err = unix.PidfdSendSignal(fd, 0, nil, 0)
	}
	if err == nil && (p.PPID != bwrapPID || envErr == nil && markerIn(env) != runID) {
		err = fmt.Errorf("%w: pid %d has parent %d and marker %q", ErrNotOurs, pid, p.PPID, markerIn(env))
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the sandbox's pid %d: %w", pid, err)
	}
	return &sandbox{pid: pid, pidfd: fd}, nil
}

func (s *sandbox) close() { unix.Close(s.pidfd) }

// waitExit waits at most d for the sandbox's first process to exit. Its
// pidfd turns readable only once the whole pid namespace is gone: PID 1's
// exit kills and reaps every other process of the namespace first
// (zap_pid_ns_processes, pid_namespaces(7)). bwrap itself exits as soon as
// the agent does, before that teardown has finished.
func (s *sandbox) waitExit(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		fds := []unix.PollFd{{Fd: int32(s.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(0, time.Until(deadline).Milliseconds())))
		if err == unix.EINTR {
			continue
		}
		return n > 0 && err == nil
	}
}

// alive reports whether the sandbox's first process still runs.
func (s *sandbox) alive() bool { return unix.PidfdSendSignal(s.pidfd, 0, nil, 0) == nil }

// signalGroup sends sig to the process group whose id is the sandbox's
// pid. PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9, kernel/signal.c:
// kill_pgrp_info on the pidfd's struct pid) addresses exactly that group:
// before setsid() there is none (ESRCH) and a pid number reused later is a
// different struct pid. On older kernels kill(-pid) is used while the
// pidfd shows the sandbox alive and leading its group; the window between
// that check and kill(2) is the one left. It returns errNoGroup when no
// group exists yet.
func (s *sandbox) signalGroup(procRoot string, sig syscall.Signal) error {
	err := unix.PidfdSendSignal(s.pidfd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if errors.Is(err, unix.EINVAL) {
		if !s.alive() {
			return errNoGroup
		}
		if pgid, perr := pgidOf(procRoot, s.pid); perr != nil || pgid != s.pid {
			return errNoGroup
		}
		err = unix.Kill(-s.pid, sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return errNoGroup
	}
	return err
}

var errNoGroup = errors.New("the jail's process group does not exist")

// guard holds what must never be signalled: PID 1, agentjail itself and
// its ancestors.
type guard map[int]bool

func newGuard(procRoot string) guard { return guard(ancestors(procRoot, os.Getpid())) }

// KillMarked kills every process under procRoot (the real /proc: pidfds
// are taken on what it lists) that carries exactly runID, except PID 1,
// the caller and its ancestors, and returns those it signalled. Each is
// signalled through a pidfd after its marker and start time were read
// again with the pidfd open, so a pid reused since the scan is never hit.
func KillMarked(procRoot, runID string) ([]Proc, error) {
	procs, err := MarkedBy(procRoot, runID)
	if err != nil {
		return nil, err
	}
	return killVerified(procRoot, runID, procs)
}

// killDescendants SIGKILLs what is left below this process once the jail
// has ended: without a pid namespace of its own (the /proc fallback) a
// daemon the agent started outlives bwrap, re-parented to agentjail (a
// subreaper), and a marker sweep misses one started with `env -i`. Each
// keeps its parent and start time until the kill (killHeld), so a pid
// reused meanwhile is never hit. Processes forked while it runs are caught
// by the next round.
func killDescendants(procRoot string) ([]Proc, error) {
	var killed []Proc
	var errs []error
	for range 3 {
		procs, err := descendants(procRoot, os.Getpid())
		if err != nil || len(procs) == 0 {
			return killed, errors.Join(append(errs, err)...)
		}
		for _, p := range procs {
			ok, err := killHeld(procRoot, p, func(now Proc) bool { return now.PPID == p.PPID })
			if ok {
				killed = append(killed, p)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		waitGone(procRoot, procs, time.Second)
	}
	return killed, errors.Join(errs...)
}

// killVerified kills those of procs (found carrying runID) that still run
// and still carry it.
func killVerified(procRoot, runID string, procs []Proc) ([]Proc, error) {
	if len(procs) == 0 {
		return nil, nil
	}
	never := newGuard(procRoot)
	var killed []Proc
	var errs []error
	buf := make([]byte, 8<<10)
	for _, p := range procs {
		if never[p.PID] {
			continue
		}
		ok, err := killHeld(procRoot, p, func(Proc) bool {
			var id string
			id, buf = readMarker(filepath.Join(procRoot, strconv.Itoa(p.PID), "environ"), buf)
			return id == runID && !zombie(procRoot, p.PID)
		})
		if ok {
			killed = append(killed, p)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

// killHeld SIGKILLs p through a pidfd opened before p is checked again: its
// start time, and still (its parent, its marker). A process that has gone,
// or is no longer p, is left alone and reported as not killed.
func killHeld(procRoot string, p Proc, still func(now Proc) bool) (bool, error) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return false, nil // gone
	}
	defer unix.Close(fd)
	if now, err := readProc(procRoot, p.PID); err != nil || now.Start != p.Start || !still(now) {
		return false, nil
	}
	switch err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ESRCH):
		return false, nil
	default:
		return false, fmt.Errorf("kill pid %d: %w", p.PID, err)
	}
}

// waitGone polls until none of procs runs any more (a zombie counts as
// gone) or the deadline passes; it returns those still running.
func waitGone(procRoot string, procs []Proc, d time.Duration) []Proc {
	deadline := time.Now().Add(d)
	for {
		var left []Proc
		for _, p := range procs {
			if now, err := readProc(procRoot, p.PID); err == nil && now.Start == p.Start && !zombie(procRoot, p.PID) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		procs = left
		time.Sleep(5 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(procRoot string, pid int) bool {
	stat, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
		}
	}
	return false
}

// signalName is "SIGTERM" for SIGTERM; signals x/sys has no name for
// (real-time ones) read "SIG<n>".
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

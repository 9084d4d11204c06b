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

	"github.com/agentjail/agentjail/procs"
)

// sandbox is the jail's first process: bwrap's child, PID 1 of the jail's
// pid namespace. Once it has called setsid() (bwrap's --new-session) its
// pid is also the process group of the agent, so the group is signalled
// through its pidfd.
type sandbox struct {
	pid   int
	pidfd int
}

// errSandboxGone: bwrap's child exited before the supervisor could open
// its pidfd, as it does when one of its mounts fails; bwrap's exit then
// says why.
var errSandboxGone = errors.New("the sandbox exited before it was adopted")

// openSandbox takes a pidfd on pid, then checks that the process behind it
// is bwrap's child and carries this run's marker. The check comes after
// the pidfd is open and the pidfd is then checked alive, so the /proc data
// read belongs to the process the pidfd names, never to a reused pid.
func openSandbox(procRoot string, pid, bwrapPID int, runID string) (*sandbox, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, errSandboxGone
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	p, err := procs.ReadProc(procRoot, pid)
	// The environment of a process that is not dumpable (a sealed jail's
	// sandbox, in its own user namespace) is readable by root only; then
	// the parent check stands alone.
	env, envErr := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "environ"))
	if alive := unix.PidfdSendSignal(fd, 0, nil, 0); errors.Is(alive, unix.ESRCH) {
		unix.Close(fd)
		return nil, errSandboxGone
	} else if err == nil {
		err = alive
	}
	if err == nil && (p.PPID != bwrapPID || envErr == nil && procs.MarkerIn(env) != runID) {
		err = fmt.Errorf("%w: pid %d has parent %d and marker %q", procs.ErrNotOurs, pid, p.PPID, procs.MarkerIn(env))
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
		if st, perr := procs.ReadStat(procRoot, s.pid); perr != nil || st.PGID != s.pid {
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

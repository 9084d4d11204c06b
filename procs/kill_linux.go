package procs

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

// Guard holds what must never be signalled: PID 1, agentjail itself and
// its ancestors.
type Guard map[int]bool

// NewGuard reads the guard of this process under procRoot.
func NewGuard(procRoot string) Guard { return Guard(ancestors(procRoot, os.Getpid())) }

// KillMarked kills every process under procRoot (the real /proc: pidfds
// are taken on what it lists) that carries exactly runID, except PID 1,
// the caller and its ancestors, and returns those it signalled. Each is
// signalled through a pidfd after its marker and start time were read
// again with the pidfd open, so a pid reused since the scan is never hit.
func KillMarked(procRoot, runID string) ([]Proc, error) {
	procs, err := MarkedBy(procRoot, runID, Since{})
	if err != nil {
		return nil, err
	}
	return KillVerified(procRoot, runID, procs)
}

// KillDescendants SIGKILLs what is left below this process once the jail
// has ended: without a pid namespace of its own (the /proc fallback) a
// daemon the agent started outlives bwrap, re-parented to agentjail (a
// subreaper), and a marker sweep misses one started with `env -i`. Each
// keeps its parent and start time until the kill (killHeld), so a pid
// reused meanwhile is never hit. Processes forked while it runs are caught
// by the next round.
func KillDescendants(procRoot string) ([]Proc, error) {
	var killed []Proc
	var errs []error
	for range 3 {
		procs, err := Descendants(procRoot, os.Getpid())
		if err != nil || len(procs) == 0 {
			return killed, errors.Join(append(errs, err)...)
		}
		for _, p := range procs {
			ok, err := KillHeld(procRoot, p, func(now Proc) bool { return now.PPID == p.PPID })
			if ok {
				killed = append(killed, p)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		WaitGone(procRoot, procs, time.Second)
	}
	return killed, errors.Join(errs...)
}

// KillVerified kills those of procs (found carrying runID) that still run
// and still carry it.
func KillVerified(procRoot, runID string, procs []Proc) ([]Proc, error) {
	if len(procs) == 0 {
		return nil, nil
	}
	never := NewGuard(procRoot)
	var killed []Proc
	var errs []error
	buf := make([]byte, 8<<10)
	for _, p := range procs {
		if never[p.PID] {
			continue
		}
		ok, err := KillHeld(procRoot, p, func(Proc) bool {
			var id string
			id, buf = readMarker(filepath.Join(procRoot, strconv.Itoa(p.PID), "environ"), buf)
			return id == runID && !Zombie(procRoot, p.PID)
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

// KillHeld SIGKILLs p through a pidfd opened before p is checked again: its
// start time, and still (its parent, its marker). A process that has gone,
// or is no longer p, is left alone and reported as not killed.
func KillHeld(procRoot string, p Proc, still func(now Proc) bool) (bool, error) {
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return false, nil // gone
	}
	defer unix.Close(fd)
	if now, err := ReadProc(procRoot, p.PID); err != nil || now.Start != p.Start || !still(now) {
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

// WaitGone polls until none of procs runs any more (a zombie counts as
// gone) or the deadline passes; it returns those still running.
func WaitGone(procRoot string, procs []Proc, d time.Duration) []Proc {
	deadline := time.Now().Add(d)
	for {
		var left []Proc
		for _, p := range procs {
			if now, err := ReadProc(procRoot, p.PID); err == nil && now.Start == p.Start && !Zombie(procRoot, p.PID) {
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

// Zombie reports whether pid has exited and waits to be reaped.
func Zombie(procRoot string, pid int) bool {
	st, err := ReadStat(procRoot, pid)
	return err != nil || st.State == 'Z' || st.State == 'X'
}

// SignalName is "SIGTERM" for SIGTERM; signals x/sys has no name for
// (real-time ones) read "SIG<n>".
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

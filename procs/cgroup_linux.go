package procs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KillCgroup writes cgroup.kill in dir, waits (at most d) until the cgroup
// is empty and removes it; it returns the processes it held.
func KillCgroup(dir, procRoot string, d time.Duration) ([]Proc, error) {
	var left []Proc
	listed := strings.Fields(ReadString(filepath.Join(dir, "cgroup.procs")))
	for _, f := range listed {
		if pid, err := strconv.Atoi(f); err == nil {
			if p, err := ReadProc(procRoot, pid); err == nil && !Zombie(procRoot, pid) {
				left = append(left, p)
			}
		}
	}
	// An empty cgroup (the usual end: the pid namespace is gone) is only
	// removed; EBUSY means a process entered it meanwhile.
	if len(listed) == 0 && os.Remove(dir) == nil {
		return nil, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return left, fmt.Errorf("cgroup.kill in %s: %w", dir, err)
	}
	deadline := time.Now().Add(d)
	for !bytes.Contains([]byte(ReadString(filepath.Join(dir, "cgroup.events"))), []byte("populated 0")) {
		if time.Now().After(deadline) {
			return left, fmt.Errorf("cgroup %s still holds processes %v after cgroup.kill", dir, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := os.Remove(dir); err != nil {
		return left, fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return left, nil
}

// KillCgroupV1 is KillCgroup for a cgroup v1 directory, which has no
// cgroup.kill: each process it lists is SIGKILLed through a pidfd taken
// before it is found in the list again (only the jail's processes can
// enter it, so a pid reused meanwhile is one of the jail's too, or not in
// the list), until the list is empty or d has passed; then it is removed.
func KillCgroupV1(dir, procRoot string, d time.Duration) ([]Proc, error) {
	var left []Proc
	listed := func() []int {
		var pids []int
		for _, f := range strings.Fields(ReadString(filepath.Join(dir, "cgroup.procs"))) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	deadline := time.Now().Add(d)
	for {
		live := 0
		for _, pid := range listed() {
			p, err := ReadProc(procRoot, pid)
			if err != nil || Zombie(procRoot, pid) {
				continue
			}
			live++
			if ok, _ := KillHeld(procRoot, p, func(Proc) bool { return slices.Contains(listed(), pid) }); ok && !slices.ContainsFunc(left, func(o Proc) bool { return o.PID == pid }) {
				left = append(left, p)
			}
		}
		// EBUSY: a process not yet reaped, or one forked meanwhile.
		err := os.Remove(dir)
		switch {
		case live == 0 && (err == nil || errors.Is(err, os.ErrNotExist)):
			return left, nil
		case time.Now().After(deadline):
			return left, fmt.Errorf("cgroup %s still holds processes %v after SIGKILL: %w", dir, d, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ReadString is the text of file p, "" when it cannot be read.
func ReadString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

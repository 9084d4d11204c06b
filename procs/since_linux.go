package procs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Since marks a moment in the history of the process table, so that a scan
// can look only at the processes created after it: every process that
// carries a run's marker was created during the run (the marker is the
// run's fresh id, and a process's environment is fixed at exec).
//
// Pids are handed out cyclically (idr_alloc_cyclic, kernel/pid.c): those
// created after the mark lie after the namespace's last pid then
// (/proc/sys/kernel/ns_last_pid) and up to its last pid now, wrapping at
// pid_max. That holds while fewer than pid_max processes were created
// meanwhile (the "processes" line of /proc/stat counts every fork on the
// host, a bound on those of this namespace); beyond, or where a file
// cannot be read, the scan looks at every process.
type Since struct {
	lastPID, pidMax int
	forks           uint64
	ok              bool
}

// Mark reads the marks under procRoot.
func Mark(procRoot string) Since {
	var s Since
	var err1, err2, err3 error
	s.lastPID, err1 = readInt(filepath.Join(procRoot, "sys/kernel/ns_last_pid"))
	s.pidMax, err2 = readInt(filepath.Join(procRoot, "sys/kernel/pid_max"))
	s.forks, err3 = forks(procRoot)
	s.ok = err1 == nil && err2 == nil && err3 == nil && s.pidMax > 0
	return s
}

// filter returns whether pid may have been created after s, judged now,
// or nil when every pid may (no mark, or the pids wrapped meanwhile).
func (s Since) filter(procRoot string) func(pid int) bool {
	if !s.ok {
		return nil
	}
	now := Mark(procRoot)
	if !now.ok || now.pidMax != s.pidMax || now.forks-s.forks >= uint64(s.pidMax) {
		return nil
	}
	from, to := s.lastPID, now.lastPID
	if from <= to {
		return func(pid int) bool { return pid > from && pid <= to }
	}
	return func(pid int) bool { return pid > from || pid <= to } // wrapped once
}

func readInt(p string) (int, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(bytes.TrimSpace(data)))
}

// forks is the "processes" count of /proc/stat: forks since boot.
func forks(procRoot string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(line, []byte("processes ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, os.ErrNotExist
}

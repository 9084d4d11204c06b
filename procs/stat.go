package procs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// Stat is what agentjail reads of /proc/PID/stat (proc_pid_stat(5)).
type Stat struct {
	Comm  string
	State byte // R, S, D, Z, T, …
	PPID  int
	PGID  int
	// Start is the start time in clock ticks since boot (field 22): with
	// the pid it names one process for good, since a reused pid never has
	// the same start time.
	Start uint64
}

var errStat = errors.New("malformed /proc/PID/stat")

// ParseStat parses a /proc/PID/stat line. comm may hold spaces and
// parentheses, so the fields after it are found from the last ')'.
func ParseStat(data []byte) (Stat, error) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return Stat{}, errStat
	}
	f := bytes.Fields(data[end+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, errStat
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Stat{}, errStat
	}
	return Stat{Comm: string(data[open+1 : end]), State: f[0][0], PPID: ppid, PGID: pgid, Start: start}, nil
}

// ReadStat reads and parses /proc/PID/stat under procRoot.
func ReadStat(procRoot string, pid int) (Stat, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

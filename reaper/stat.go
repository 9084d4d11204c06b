package reaper

import (
	"bytes"
	"errors"
	"strconv"
)

// stat is what the reaper reads of /proc/PID/stat (proc_pid_stat(5)).
type stat struct {
	comm  string
	state byte // R, S, D, Z, T, …
	ppid  int
	start uint64 // starttime, field 22: with the pid, a process's identity
}

var errStat = errors.New("malformed /proc/PID/stat")

// parseStat parses a /proc/PID/stat line. comm may hold spaces and
// parentheses, so the fields after it are found from the last ')'.
func parseStat(data []byte) (stat, error) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return stat{}, errStat
	}
	f := bytes.Fields(data[end+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, errStat
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return stat{}, errStat
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return stat{}, errStat
	}
	return stat{comm: string(data[open+1 : end]), state: f[0][0], ppid: ppid, start: start}, nil
}

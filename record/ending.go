package record

import (
	"fmt"
	"strconv"
)

// LimitMessage is the line agentjail prints when the jail reached a cap
// (reason pids_limit or memory_limit), "" otherwise.
func (r *Record) LimitMessage() string {
	switch {
	case r.Reason == ReasonPidsLimit && r.Limits.PidsMax != nil:
		return fmt.Sprintf("the jail reached limits.pids (%d tasks: processes and threads) and a fork was refused, so agentjail ended it (exit %d); raise limits.pids if the task needs more", *r.Limits.PidsMax, ExitLimit)
	case r.Reason == ReasonMemoryLimit && r.Limits.MemoryMax != nil:
		return fmt.Sprintf("the jail ran out of limits.memory (%s, its tmpfs files included) and the kernel killed a process, so agentjail ended it (exit %d); raise limits.memory if the task needs more", gib(*r.Limits.MemoryMax), ExitLimit)
	}
	return ""
}

// gib writes n bytes in GiB or MiB, to one decimal.
func gib(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

package record

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxPrinted is how many violations agentjail prints; the record lists
// MaxViolations.
const MaxPrinted = 50

// Ending is the one line agentjail prints when it ended the run itself:
// at a cap (pids_limit, memory_limit), a timeout (wall_timeout,
// idle_timeout), `agentjail stop` (stopped), a signal it received
// (interrupted), or the post-run checks (violation); "" when the agent
// ended it. It follows the agent's output, so the operator sees why the
// output stopped. (A setup failure's line is its error, which names the
// record too: launch's writeSetupFailed.)
func (r *Record) Ending() string {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	var what string
	switch {
	case r.Reason == ReasonPidsLimit && r.Limits.PidsMax != nil:
		what = fmt.Sprintf("limits.pids reached (%d tasks), a fork was refused (exit %d); raise limits.pids if the task needs more", *r.Limits.PidsMax, r.ExitCode)
	case r.Reason == ReasonMemoryLimit && r.Limits.MemoryMax != nil:
		what = fmt.Sprintf("limits.memory reached (%s, tmpfs files included), the kernel killed a process (exit %d); raise limits.memory if the task needs more", gib(*r.Limits.MemoryMax), r.ExitCode)
	case r.Reason == ReasonWallTimeout:
		what = fmt.Sprintf("wall limit %s reached (exit %d)", ms(r.Limits.WallMS), r.ExitCode)
	case r.Reason == ReasonIdleTimeout:
		what = fmt.Sprintf("idle limit %s reached: no output for that long (exit %d)", ms(r.Limits.IdleMS), r.ExitCode)
	case r.Reason == ReasonStopped && r.Terminal != nil && r.Terminal.EndedByEscape:
		what = fmt.Sprintf("ended by the operator's ~. (exit %d)", r.ExitCode)
	case r.Reason == ReasonStopped:
		what = fmt.Sprintf("stopped by agentjail stop (exit %d)", r.ExitCode)
	case r.Reason == ReasonInterrupted && r.Signal != nil:
		what = fmt.Sprintf("agentjail received %s (exit %d)", *r.Signal, r.ExitCode)
	case r.Reason == ReasonViolation:
		counts := r.ViolationCounts
		if counts == nil { // a record made without Violate
			counts = map[string]int{}
			for _, v := range r.Violations {
				counts[v.What]++
			}
		}
		var order []string // as found; kinds only counted last
		for _, v := range r.Violations {
			if !slices.Contains(order, v.What) {
				order = append(order, v.What)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			if !slices.Contains(order, k) {
				order = append(order, k)
			}
		}
		total := 0
		for i, k := range order {
			order[i] = fmt.Sprintf("%d %s", counts[k], k)
			total += counts[k]
		}
		listed := "listed above"
		if total > MaxPrinted {
			listed = fmt.Sprintf("the first %d listed above", MaxPrinted)
		}
		what = fmt.Sprintf("the checks after it found the policy violated (%s, %s) (exit %d)", strings.Join(order, ", "), listed, r.ExitCode)
	default:
		return ""
	}
	return "the run ended: " + what
}

// gib writes n bytes in GiB or MiB, to one decimal.
func gib(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

package supervise

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentjail/agentjail/mounts"
)

// OwnCgroupPath returns the cgroup v2 path in a /proc/PID/cgroup file (its
// "0::PATH" line, see cgroups(7)), and false when there is none.
func OwnCgroupPath(cgroupFile string) (string, bool) {
	for _, line := range strings.Split(cgroupFile, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// OwnCgroupV1Path returns the path in the cgroup v1 hierarchy that holds
// controller, from a /proc/PID/cgroup file ("4:memory:/a/b", or
// "2:cpu,cpuacct:/" for co-mounted controllers), and false when no v1
// hierarchy holds it.
func OwnCgroupV1Path(cgroupFile, controller string) (string, bool) {
	for _, line := range strings.Split(cgroupFile, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2], true
		}
	}
	return "", false
}

// CgroupDir returns the directory of the cgroup v2 whose path is own, from
// a parsed mount table (mounts.ParseMountinfo), or "" when no cgroup2 mount
// shows it. Hybrid hosts mount cgroup v2 at /sys/fs/cgroup/unified, pure v2
// hosts at /sys/fs/cgroup; a mount may show only a subtree (its root).
func CgroupDir(table []mounts.Mount, own string) string {
	return cgroupMountDir(table, own, func(m mounts.Mount) bool { return m.FSType == "cgroup2" })
}

// CgroupV1Dir is CgroupDir for the cgroup v1 hierarchy of controller: a
// "cgroup" mount whose options name it (/sys/fs/cgroup/pids: rw,pids).
func CgroupV1Dir(table []mounts.Mount, own, controller string) string {
	return cgroupMountDir(table, own, func(m mounts.Mount) bool {
		return m.FSType == "cgroup" && slices.Contains(m.Super, controller)
	})
}

func cgroupMountDir(table []mounts.Mount, own string, hierarchy func(mounts.Mount) bool) string {
	for _, m := range table {
		if !hierarchy(m) {
			continue
		}
		rel, ok := strings.CutPrefix(own, m.Root)
		if m.Root == "/" {
			rel, ok = own, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue // this mount shows another part of the hierarchy
		}
		return path.Join(m.Point, rel)
	}
	return ""
}

// limitFiles name the files of one cgroup version that a run's limits use.
// pids.max, pids.events and pids.peak are the same in both.
type limitFiles struct {
	memoryMax string
	// swapMax caps swap; in v1 (memsw) it caps memory and swap together.
	swapMax        string
	swapPlusMemory bool
	// oomEvents holds the "oom_kill" counter: processes the kernel's OOM
	// killer ended in the cgroup.
	oomEvents  string
	memoryPeak string
}

var (
	// Documentation/admin-guide/cgroup-v2.rst, "Memory Interface Files".
	v2Files = limitFiles{memoryMax: "memory.max", swapMax: "memory.swap.max",
		oomEvents: "memory.events", memoryPeak: "memory.peak"}
	// Documentation/admin-guide/cgroup-v1/memory.rst; oom_kill in
	// memory.oom_control since Linux 4.13.
	v1Files = limitFiles{memoryMax: "memory.limit_in_bytes", swapMax: "memory.memsw.limit_in_bytes", swapPlusMemory: true,
		oomEvents: "memory.oom_control", memoryPeak: "memory.max_usage_in_bytes"}
)

// flatKeyed returns the value of key in a cgroup file of "key value" lines
// (pids.events "max 3", memory.events and memory.oom_control "oom_kill 1"),
// and false when the file has no such line.
func flatKeyed(text, key string) (int64, bool) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// parseMeminfo returns MemTotal and SwapTotal in bytes from a
// /proc/meminfo file (proc(5): values in KiB); 0 for a missing line.
func parseMeminfo(text string) (ram, swap int64) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			ram = n << 10
		case "SwapTotal:":
			swap = n << 10
		}
	}
	return ram, swap
}

// LimitMessage is the one line agentjail prints when it ended the run
// itself: at a cap (pids_limit, memory_limit), a timeout (wall_timeout,
// idle_timeout), `agentjail stop` (stopped) or a signal it received
// (interrupted); "" when the agent ended it. It follows the agent's
// output, so the operator sees why the output stopped.
func LimitMessage(r Record) string {
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
	case r.Reason == ReasonStopped:
		what = fmt.Sprintf("stopped by agentjail stop (exit %d)", r.ExitCode)
	case r.Reason == ReasonInterrupted && r.Signal != nil:
		what = fmt.Sprintf("agentjail received %s (exit %d)", *r.Signal, r.ExitCode)
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

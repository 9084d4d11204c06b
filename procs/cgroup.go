package procs

import (
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// a parsed mount table (ParseMountinfo), or "" when no cgroup2 mount
// shows it. Hybrid hosts mount cgroup v2 at /sys/fs/cgroup/unified, pure v2
// hosts at /sys/fs/cgroup; a mount may show only a subtree (its root).
func CgroupDir(table []Mount, own string) string {
	return cgroupMountDir(table, own, func(m Mount) bool { return m.FSType == "cgroup2" })
}

// CgroupV1Dir is CgroupDir for the cgroup v1 hierarchy of controller: a
// "cgroup" mount whose options name it (/sys/fs/cgroup/pids: rw,pids).
func CgroupV1Dir(table []Mount, own, controller string) string {
	return cgroupMountDir(table, own, func(m Mount) bool {
		return m.FSType == "cgroup" && slices.Contains(m.Super, controller)
	})
}

func cgroupMountDir(table []Mount, own string, hierarchy func(Mount) bool) string {
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

// FlatKeyed returns the value of key in a cgroup file of "key value" lines
// (pids.events "max 3", memory.events and memory.oom_control "oom_kill 1"),
// and false when the file has no such line.
func FlatKeyed(text, key string) (int64, bool) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// ParseMeminfo returns MemTotal and SwapTotal in bytes from a
// /proc/meminfo file (proc(5): values in KiB); 0 for a missing line.
func ParseMeminfo(text string) (ram, swap int64) {
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

// HostMemory returns the host's RAM and swap in bytes (/proc/meminfo under
// procRoot; 0 when it cannot be read).
func HostMemory(procRoot string) (ram, swap int64) {
	return ParseMeminfo(ReadString(filepath.Join(procRoot, "meminfo")))
}

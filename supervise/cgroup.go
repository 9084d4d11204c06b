package supervise

import (
	"path"
	"strings"

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

// CgroupDir returns the directory of the cgroup v2 whose path is own, from
// a parsed mount table (mounts.ParseMountinfo), or "" when no cgroup2 mount
// shows it. Hybrid hosts mount cgroup v2 at /sys/fs/cgroup/unified, pure v2
// hosts at /sys/fs/cgroup; a mount may show only a subtree (its root).
func CgroupDir(table []mounts.Mount, own string) string {
	for _, m := range table {
		if m.FSType != "cgroup2" {
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

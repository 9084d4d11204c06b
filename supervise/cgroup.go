package supervise

import (
	"path"
	"strconv"
	"strings"
)

// cgroupDir returns the directory of the cgroup v2 a process is in, from
// its /proc/PID/mountinfo and /proc/PID/cgroup, or "" when there is no
// cgroup v2 (the unified hierarchy: "0::PATH" in cgroup, fstype cgroup2 in
// mountinfo, see proc(5) and cgroups(7)). Hybrid hosts mount it at
// /sys/fs/cgroup/unified, pure v2 hosts at /sys/fs/cgroup.
func cgroupDir(mountinfo, cgroup string) string {
	var own string
	found := false
	for _, line := range strings.Split(cgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own, found = p, true
			break
		}
	}
	if !found {
		return ""
	}
	for _, line := range strings.Split(mountinfo, "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, mnt := unescapeMount(f[3]), unescapeMount(f[4])
		rel, ok := strings.CutPrefix(own, root)
		if root == "/" {
			rel, ok = own, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue // this mount shows another part of the hierarchy
		}
		return path.Join(mnt, rel)
	}
	return ""
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

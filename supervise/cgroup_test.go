package supervise

import (
	"strings"
	"testing"

	"github.com/agentjail/agentjail/mounts"
)

func TestCgroupDir(t *testing.T) {
	t.Parallel()
	const hybrid = `25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
`
	const pure = `30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
	const bound = `40 1 0:26 /system.slice /mnt/my\040cg rw - cgroup2 cgroup2 rw
`
	for _, c := range []struct {
		name, mountinfo, cgroup, want string
	}{
		{"hybrid, root cgroup", hybrid, "4:pids:/x\n0::/\n", "/sys/fs/cgroup/unified"},
		{"pure v2, a service", pure, "0::/system.slice/ci.service\n", "/sys/fs/cgroup/system.slice/ci.service"},
		{"mount of a subtree, escaped path", bound, "0::/system.slice/ci.service\n", "/mnt/my cg/ci.service"},
		{"subtree that does not hold us", bound, "0::/user.slice\n", ""},
		{"v1 only", "27 25 0:24 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", "4:pids:/\n", ""},
		{"no v2 line", pure, "4:pids:/\n", ""},
	} {
		table, err := mounts.ParseMountinfo(strings.NewReader(c.mountinfo))
		if err != nil {
			t.Fatal(err)
		}
		own, ok := OwnCgroupPath(c.cgroup)
		if got := CgroupDir(table, own); !ok && c.want != "" || ok && got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

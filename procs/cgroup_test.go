package procs

import (
	"strings"
	"testing"
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
		table, err := ParseMountinfo(strings.NewReader(c.mountinfo))
		if err != nil {
			t.Fatal(err)
		}
		own, ok := OwnCgroupPath(c.cgroup)
		if got := CgroupDir(table, own); !ok && c.want != "" || ok && got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestCgroupV1Dir(t *testing.T) {
	t.Parallel()
	// This project's CI host: cgroup v1 controllers beside a cgroup v2
	// that holds only hugetlb; memory in a cgroup of its own.
	const hybrid = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const cgroupFile = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/194a\n2:cpu,cpuacct:/x\n0::/\n"
	// A container shown only its own subtree of the pids hierarchy.
	const bound = "50 1 0:35 /docker/abc /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n"
	table, err := ParseMountinfo(strings.NewReader(hybrid))
	if err != nil {
		t.Fatal(err)
	}
	boundTable, err := ParseMountinfo(strings.NewReader(bound))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, controller, cgroup string
		table                    []Mount
		want                     string
	}{
		{"pids at the root", "pids", cgroupFile, table, "/sys/fs/cgroup/pids"},
		{"memory in a cgroup", "memory", cgroupFile, table, "/sys/fs/cgroup/memory/process_api/194a"},
		{"co-mounted", "cpuacct", cgroupFile, table, "/sys/fs/cgroup/cpu,cpuacct/x"},
		{"no such hierarchy", "blkio", cgroupFile, table, ""},
		{"not mounted", "pids", cgroupFile, nil, ""},
		{"a bound subtree", "pids", "8:pids:/docker/abc/sub\n", boundTable, "/sys/fs/cgroup/pids/sub"},
		{"outside the bound subtree", "pids", "8:pids:/other\n", boundTable, ""},
		{"pure v2", "pids", "0::/system.slice\n", table, ""},
	} {
		got := ""
		if own, ok := OwnCgroupV1Path(c.cgroup, c.controller); ok {
			got = CgroupV1Dir(c.table, own, c.controller)
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if _, ok := OwnCgroupV1Path(cgroupFile, "name=systemd"); !ok {
		t.Error("a named hierarchy is a v1 hierarchy too")
	}
	if _, ok := OwnCgroupV1Path("0::/\n", "pids"); ok {
		t.Error("the v2 line holds no v1 controller")
	}
}

func TestCgroupFlatKeyedFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text, key string
		want      int64
		ok        bool
	}{
		{"max 3\n", "max", 3, true}, // pids.events, v1 and v2
		{"max 0\n", "max", 0, true}, //
		{"low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n", "oom_kill", 1, true}, // v2 memory.events
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill", 2, true},                // v1 memory.oom_control
		{"oom_kill_disable 0\nunder_oom 0\n", "oom_kill", 0, false},                           // v1 before Linux 4.13
		{"", "max", 0, false},
		{"max x\n", "max", 0, false},
	} {
		if got, ok := FlatKeyed(c.text, c.key); got != c.want || ok != c.ok {
			t.Errorf("FlatKeyed(%q, %q) = %d, %v; want %d, %v", c.text, c.key, got, ok, c.want, c.ok)
		}
	}
	ram, swap := ParseMeminfo("MemTotal:       24567352 kB\nMemFree:        23000000 kB\nSwapTotal:             0 kB\n")
	if ram != 24567352<<10 || swap != 0 {
		t.Errorf("parseMeminfo = %d, %d", ram, swap)
	}
}

package supervise

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/record"
)

// cgroupHost is a fixture host: a procfs root (self/cgroup,
// self/mountinfo, meminfo) and cgroup "mounts" that are plain directories
// under root. makeCgroup reads and writes them as it would cgroupfs.
type cgroupHost struct{ root, proc string }

func newCgroupHost(t *testing.T, cgroupFile string, mountinfo func(root string) string, files map[string]string) cgroupHost {
	t.Helper()
	root := t.TempDir()
	h := cgroupHost{root: root, proc: filepath.Join(root, "proc")}
	all := map[string]string{
		"proc/self/cgroup":    cgroupFile,
		"proc/self/mountinfo": mountinfo(root),
		"proc/meminfo":        "MemTotal:       8388608 kB\nSwapTotal:      1048576 kB\n",
	}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// read returns a file makeCgroup wrote (mode 0, as cgroupfs files need no
// mode: readable here only after a chmod), "" when it is not there.
func read(t *testing.T, p string) string {
	t.Helper()
	if os.Chmod(p, 0o600) != nil {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantNotes(t *testing.T, notes []record.Note, want ...string) {
	t.Helper()
	var got []string
	for _, n := range notes {
		got = append(got, n.What)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("degradations %v, want %v:\n%+v", got, want, notes)
	}
}

// TestMakeCgroupV2: on a cgroup v2 host whose cgroup offers pids and
// memory, the run's cgroup v2 holds every limit, and an OOM kill takes the
// whole jail (memory.oom.group).
func TestMakeCgroupV2(t *testing.T) {
	t.Parallel()
	h := newCgroupHost(t, "0::/system.slice/ci.service\n",
		func(root string) string {
			return "30 1 0:26 / " + root + "/cg rw - cgroup2 cgroup2 rw,nsdelegate\n"
		},
		map[string]string{
			"cg/system.slice/ci.service/agentjail/cgroup.controllers":     "cpu io memory pids\n",
			"cg/system.slice/ci.service/agentjail/cgroup.subtree_control": "",
		})
	c, notes := makeCgroup(h.proc, "run1", cgroupLimits{pids: 4096, memory: 1 << 30, swap: 0})
	wantNotes(t, notes)
	dir := filepath.Join(h.root, "cg/system.slice/ci.service/agentjail/run1")
	if c == nil || c.dir != dir || c.fd < 0 || len(c.v1) != 0 || c.pids != dir || c.memory != dir {
		t.Fatalf("cgroup %+v, want everything in %s", c, dir)
	}
	defer c.end(h.proc, 0)
	for file, want := range map[string]string{"pids.max": "4096", "memory.max": "1073741824", "memory.swap.max": "0", "memory.oom.group": "1"} {
		if got := read(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if *c.pidsMax != 4096 || *c.memoryMax != 1<<30 || *c.swapMax != 0 {
		t.Errorf("recorded limits %d %d %d", *c.pidsMax, *c.memoryMax, *c.swapMax)
	}
	if err := c.join(42); err != nil {
		t.Errorf("join with no cgroup v1: %v", err)
	}
}

// TestMakeCgroupV1: this project's CI host. Its cgroup v2 holds only
// hugetlb, so the limits go to cgroups of the run's own in the pids and
// memory v1 hierarchies (memsw caps memory and swap together), which
// bwrap and the sandbox join by pid; the cgroup v2 is still made (for
// cgroup.kill).
func TestMakeCgroupV1(t *testing.T) {
	t.Parallel()
	h := newCgroupHost(t, "8:pids:/\n4:memory:/process_api/194a\n0::/\n",
		func(root string) string {
			return "34 30 0:31 / " + root + "/memory rw,relatime - cgroup cgroup rw,memory\n" +
				"38 30 0:35 / " + root + "/pids rw,relatime - cgroup cgroup rw,pids\n" +
				"40 30 0:37 / " + root + "/unified rw,relatime - cgroup2 cgroup2 rw\n"
		},
		map[string]string{
			"unified/agentjail/cgroup.controllers":          "hugetlb\n",
			"memory/process_api/194a/memory.limit_in_bytes": "9223372036854771712\n",
			"pids/cgroup.procs":                             "",
		})
	c, notes := makeCgroup(h.proc, "run1", cgroupLimits{pids: 512, memory: 256 << 20, swap: 64 << 20})
	wantNotes(t, notes)
	if c == nil {
		t.Fatal("no cgroup")
	}
	defer c.end(h.proc, 0)
	pids := filepath.Join(h.root, "pids/agentjail/run1")
	mem := filepath.Join(h.root, "memory/process_api/194a/agentjail/run1")
	if c.dir != filepath.Join(h.root, "unified/agentjail/run1") || c.pids != pids || c.memory != mem || c.memoryFiles != v1Files {
		t.Fatalf("cgroup %+v", c)
	}
	if v2, v1 := c.dirs(); v2 != c.dir || strings.Join(v1, " ") != mem+" "+pids {
		t.Errorf("dirs %q %q", v2, v1)
	}
	for p, want := range map[string]string{
		filepath.Join(pids, "pids.max"):                   "512",
		filepath.Join(mem, "memory.limit_in_bytes"):       "268435456",
		filepath.Join(mem, "memory.memsw.limit_in_bytes"): "335544320",
		filepath.Join(mem, "memory.oom.group"):            "", // v1 has none: emulated
		filepath.Join(c.dir, "pids.max"):                  "",
	} {
		if got := read(t, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if *c.swapMax != 64<<20 {
		t.Errorf("swap %d", *c.swapMax)
	}
	if err := c.join(4242); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pids, mem} {
		if got := read(t, filepath.Join(d, "cgroup.procs")); got != "4242" {
			t.Errorf("%s/cgroup.procs = %q", d, got)
		}
	}
}

// TestJoinGoneSandbox: a sandbox that exited before it could join the
// run's cgroup v1 directory (it failed a mount) is errSandboxGone, which
// leaves the run to bwrap's own setup failure, not a cgroup error. On a
// real cgroup v1 pids hierarchy, as root.
func TestJoinGoneSandbox(t *testing.T) {
	t.Parallel()
	root := "/sys/fs/cgroup/pids"
	dir, err := os.MkdirTemp(root, "agentjail-test-")
	if err != nil {
		t.Skipf("needs a writable cgroup v1 pids hierarchy at %s (root, a hybrid host): %v", root, err)
	}
	defer os.Remove(dir)
	// Through the reaper: TestMain made it the owner of wait4(-1), so
	// exec.Cmd's own wait would find nothing to wait for.
	gone := exec.Command("true")
	if err := reaper.Start(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := reaper.Wait(gone); err != nil {
		t.Fatal(err)
	}
	c := &runCgroup{v1: map[string]string{"pids": dir}}
	if err := c.join(gone.Process.Pid); !errors.Is(err, errSandboxGone) {
		t.Errorf("join of a reaped pid: %v, want errSandboxGone", err)
	}
}

// TestMakeCgroupNone: without any cgroup hierarchy each limit says what
// holds instead: pids becomes the rlimit nproc, memory is not enforced.
func TestMakeCgroupNone(t *testing.T) {
	t.Parallel()
	h := newCgroupHost(t, "0::/\n", func(string) string { return "22 1 0:20 / / rw - ext4 /dev/sda1 rw\n" }, nil)
	c, notes := makeCgroup(h.proc, "run1", cgroupLimits{pids: 4096, memory: 1 << 30})
	if c != nil {
		t.Errorf("cgroup %+v", c)
	}
	wantNotes(t, notes, "cgroup", "cgroup.pids", "cgroup.memory")
	if len(notes) == 3 && (!strings.Contains(notes[1].Detail, "rlimit nproc") || !strings.Contains(notes[2].Detail, "not enforced")) {
		t.Errorf("notes %+v", notes)
	}
	// Nothing asked: only the missing cgroup is said.
	_, notes = makeCgroup(h.proc, "run2", cgroupLimits{})
	wantNotes(t, notes, "cgroup")
}

// TestCgroupUsage: the counters a run's cgroups keep, read from either
// version's files; a memory kill outranks refused forks (it is what ended
// the jail).
func TestCgroupUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, files := range []limitFiles{v1Files, v2Files} {
		c := &runCgroup{pids: dir, memory: dir, memoryFiles: files}
		if u := c.usage(true); u.refused != nil || u.oomKills != nil || u.pidsPeak != nil || u.memoryPeak != nil || u.exceeded() != "" {
			t.Errorf("%s: no files, usage %+v", files.oomEvents, u)
		}
		write("pids.events", "max 0\n")
		write(files.oomEvents, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
		write("pids.peak", "17\n")
		write(files.memoryPeak, "2052096\n")
		u := c.usage(true)
		if u.exceeded() != "" || *u.refused != 0 || *u.oomKills != 0 || *u.pidsPeak != 17 || *u.memoryPeak != 2052096 {
			t.Errorf("%s: usage %+v", files.oomEvents, u)
		}
		if u := c.usage(false); u.pidsPeak != nil || u.memoryPeak != nil {
			t.Errorf("peaks read unasked: %+v", u)
		}
		write("pids.events", "max 3\n")
		if r := c.usage(false).exceeded(); r != record.ReasonPidsLimit {
			t.Errorf("refused forks: %q", r)
		}
		write(files.oomEvents, "oom 1\noom_kill 1\n")
		if r := c.usage(false).exceeded(); r != record.ReasonMemoryLimit {
			t.Errorf("an OOM kill: %q", r)
		}
		for _, f := range []string{"pids.events", "pids.peak", files.oomEvents, files.memoryPeak} {
			os.Remove(filepath.Join(dir, f))
		}
	}
	if u := (&runCgroup{}).usage(true); u != (cgroupUsage{}) {
		t.Errorf("no limits, usage %+v", u)
	}
}

// TestCounterFileHeld: a polled counter is opened once and read again in
// place (a file put in its path's place later is not looked at), and one
// missing at first is opened once it appears.
func TestCounterFileHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "pids.events")
	var f counterFile
	defer f.close()
	if got := f.read(p); got != "" || f.open {
		t.Fatalf("missing file: %q, open %v", got, f.open)
	}
	if err := os.WriteFile(p, []byte("max 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.read(p); got != "max 0\n" {
		t.Fatalf("first read %q", got)
	}
	if err := os.WriteFile(p, []byte("max 12\n"), 0o644); err != nil { // in place, as the kernel updates it
		t.Fatal(err)
	}
	if got := f.read(p); got != "max 12\n" {
		t.Errorf("read in place %q, want the new text", got)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("max 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, p); err != nil {
		t.Fatal(err)
	}
	if got := f.read(p); got != "max 12\n" {
		t.Errorf("after a rename over it %q: the file was opened again", got)
	}
}

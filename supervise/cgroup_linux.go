package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/mounts"
)

// runCgroup is a run's own cgroups. Its cgroup v2 (dir): bwrap is cloned
// straight into it (CLONE_INTO_CGROUP, Go's SysProcAttr.UseCgroupFD), so
// every process of the jail is in it from the first instruction, and
// cgroup.kill (Linux 5.14) ends them all at once. The pids and memory
// limits go where the host offers those controllers: that cgroup v2, or,
// on a host that keeps them on cgroup v1 (a hybrid layout), a cgroup of
// the run's in each v1 hierarchy, which the sandbox joins by pid before
// any agent code runs (join). The run user cannot move a process
// out of any of them: that needs write access to a common ancestor's
// cgroup.procs (cgroups(7)).
type runCgroup struct {
	dir string // the cgroup v2, "" without one
	fd  int    // dir, open for CLONE_INTO_CGROUP; -1 without
	// pids and memory are the directories whose limits are set ("" for
	// none); memoryFiles names the latter's files, by version.
	pids, memory string
	memoryFiles  limitFiles
	// v1 are the cgroup v1 directories the run made.
	v1 map[string]string // controller -> directory

	pidsMax, memoryMax, swapMax *int64
}

// cgroupLimits are the limits a run asks of its cgroup (0: none; swap
// counts only with memory).
type cgroupLimits struct{ pids, memory, swap int64 }

// noKill says what still ends a run without a cgroup v2 of its own.
const noKill = "the run has no cgroup of its own to kill: the pid namespace's teardown (or, without one, agentjail killing what is left below it) and the marker sweep end it"

// makeCgroup creates <agentjail's cgroup>/agentjail/<runID> in the cgroup
// v2 hierarchy and sets the limits asked where a hierarchy offers their
// controller: that cgroup where its parent can enable the controller, else
// <agentjail's cgroup in the controller's v1 hierarchy>/agentjail/<runID>.
// What it cannot do comes back as degradations; with no cgroup at all the
// pid namespace's teardown and the marker sweep still end the run.
func makeCgroup(procRoot, runID string, want cgroupLimits) (*runCgroup, []Note) {
	c := &runCgroup{fd: -1, v1: map[string]string{}}
	var notes []Note
	asked := map[string]int64{"pids": want.pids, "memory": want.memory}
	controllers := []string{}
	for _, name := range []string{"pids", "memory"} {
		if asked[name] > 0 {
			controllers = append(controllers, name)
		}
	}
	own := readString(filepath.Join(procRoot, "self/cgroup"))
	// notInV2 says why a controller is not taken from cgroup v2.
	notInV2 := map[string]string{}
	for _, name := range controllers {
		notInV2[name] = "no cgroup v2 is mounted"
	}
	if base := ownCgroup(procRoot, own); base == "" {
		notes = append(notes, Note{"cgroup", "no cgroup v2 hierarchy is mounted: " + noKill})
	} else {
		parent := filepath.Join(base, "agentjail")
		dir := filepath.Join(parent, runID)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			notes = append(notes, Note{"cgroup", fmt.Sprintf("cannot create %s: %v; %s", parent, err, noKill)})
			for _, name := range controllers {
				notInV2[name] = fmt.Sprintf("cannot create %s", parent)
			}
		} else {
			available := strings.Fields(readString(filepath.Join(parent, "cgroup.controllers")))
			for _, name := range controllers {
				if !slices.Contains(available, name) {
					notInV2[name] = fmt.Sprintf("%s offers only %q", parent, strings.Join(available, " "))
					continue
				}
				// Enabling a controller for the children of our own
				// "agentjail" cgroup is allowed: it holds no processes
				// (cgroups(7), "no internal processes" rule).
				if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+name), 0); err != nil {
					notInV2[name] = fmt.Sprintf("cannot enable it in %s: %v", parent, err)
					continue
				}
				delete(notInV2, name)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				notes = append(notes, Note{"cgroup", fmt.Sprintf("cannot create %s: %v; %s", dir, err, noKill)})
			} else if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				os.Remove(dir)
				notes = append(notes, Note{"cgroup", fmt.Sprintf("cannot open %s: %v; %s", dir, err, noKill)})
			} else {
				c.dir, c.fd = dir, fd
			}
		}
	}
	for _, name := range controllers {
		if _, lacks := notInV2[name]; !lacks && c.dir == "" {
			notInV2[name] = "the run's cgroup could not be made"
		}
	}
	var table []mounts.Mount // read once, when a v1 hierarchy is looked for
	for _, name := range controllers {
		dir, files := c.dir, v2Files
		if _, lacks := notInV2[name]; lacks {
			if table == nil {
				table = readMountinfo(procRoot)
			}
			var err error
			if dir, err = makeV1(table, own, name, runID); err != nil {
				notes = append(notes, Note{"cgroup." + name, fmt.Sprintf("no %s controller for the run (cgroup v2: %s; v1: %v): %s", name, notInV2[name], err, unheld[name])})
				continue
			}
			c.v1[name], files = dir, v1Files
		}
		if err := c.set(name, dir, files, want); err != nil {
			notes = append(notes, Note{"cgroup." + name, fmt.Sprintf("%v: %s", err, unheld[name])})
			if c.v1[name] != "" {
				os.Remove(dir)
				delete(c.v1, name)
			}
			continue
		}
		if name == "memory" {
			notes = append(notes, c.setMemoryExtras(procRoot, files, want.swap)...)
		}
	}
	if c.dir == "" && len(c.v1) == 0 {
		return nil, notes
	}
	return c, notes
}

// unheld says what a missing controller leaves unenforced.
var unheld = map[string]string{
	"pids":   "limits.pids holds as the rlimit nproc instead, where a fork bomb is held but not seen (the run ends at its idle or wall limit); see docs/supervision.md, Without a cgroup",
	"memory": "limits.memory is not enforced, nor any cap on the tmpfs mounts the agent makes; see docs/supervision.md, Without a cgroup",
}

// makeV1 creates <agentjail's cgroup>/agentjail/<runID> in the cgroup v1
// hierarchy of controller and returns it.
func makeV1(table []mounts.Mount, own, controller, runID string) (string, error) {
	rel, ok := OwnCgroupV1Path(own, controller)
	base := CgroupV1Dir(table, rel, controller)
	if !ok || base == "" {
		return "", errors.New("no cgroup v1 hierarchy holds it either")
	}
	parent := filepath.Join(base, "agentjail")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot create %s: %w", parent, err)
	}
	dir := filepath.Join(parent, runID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", dir, err)
	}
	return dir, nil
}

// set writes one controller's limits in dir.
func (c *runCgroup) set(controller, dir string, files limitFiles, want cgroupLimits) error {
	write := func(file string, v int64) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
			return fmt.Errorf("cannot set %s: %w", filepath.Join(dir, file), err)
		}
		return nil
	}
	if controller == "pids" {
		if err := write("pids.max", want.pids); err != nil {
			return err
		}
		c.pids, c.pidsMax = dir, &want.pids
		return nil
	}
	if err := write(files.memoryMax, want.memory); err != nil {
		return err
	}
	c.memory, c.memoryFiles, c.memoryMax = dir, files, &want.memory
	return nil
}

// setMemoryExtras sets what goes with memory.max: the swap limit, and on
// v2 memory.oom.group, so that an OOM kill ends the whole jail at once. v1
// has no such switch: the supervisor's poll (exceeded) emulates it. What
// cannot be set is returned as degradations.
func (c *runCgroup) setMemoryExtras(procRoot string, files limitFiles, swap int64) []Note {
	var notes []Note
	v := swap
	if files.swapPlusMemory {
		v += *c.memoryMax
	}
	p := filepath.Join(c.memory, files.swapMax)
	if err := os.WriteFile(p, []byte(strconv.FormatInt(v, 10)), 0); err == nil {
		c.swapMax = &swap
	} else {
		// No swap accounting (swapaccount=0, or a kernel without it):
		// harmless on a host without swap.
		if _, hostSwap := HostMemory(procRoot); hostSwap > 0 {
			notes = append(notes, Note{"cgroup.swap", fmt.Sprintf("cannot set %s: %v: the jail may swap out beyond limits.memory, up to the host's %d bytes of swap", p, err, hostSwap)})
		}
	}
	if files == v2Files {
		if err := os.WriteFile(filepath.Join(c.memory, "memory.oom.group"), []byte("1"), 0); err != nil {
			notes = append(notes, Note{"cgroup.memory", fmt.Sprintf("cannot set memory.oom.group: %v: an OOM kill ends one process; agentjail ends the rest when it sees it (within %v)", err, limitPoll)})
		}
	}
	return notes
}

// join moves pid into the run's cgroup v1 directories (cgroup v2 needs no
// such step: bwrap is cloned into it). The sandbox joins them before it is
// released to run the agent: every process of the agent's descends from
// it. bwrap's own process outside the jail, which runs no agent code,
// stays out: each move is a migration, which takes the cgroup threadgroup
// rwsem for writing (kernel/cgroup/cgroup.c, cgroup_attach_lock).
func (c *runCgroup) join(pid int) error {
	for _, dir := range c.v1 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cannot move pid %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// limitPoll is how often the supervisor reads the run's limit counters:
// cgroup v1 files do not notify, so both versions are polled alike.
const limitPoll = 100 * time.Millisecond

// cgroupUsage is what the run's cgroups counted.
type cgroupUsage struct {
	refused, oomKills, pidsPeak, memoryPeak *int64
}

// usage reads the counters (peaks too when asked); a counter its
// hierarchy lacks is nil.
func (c *runCgroup) usage(peaks bool) cgroupUsage {
	var u cgroupUsage
	read := func(dir, file, key string) *int64 {
		if dir == "" {
			return nil
		}
		text := readString(filepath.Join(dir, file))
		v, ok := flatKeyed(text, key)
		if key == "" { // a file of one number
			n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			v, ok = n, err == nil
		}
		if !ok {
			return nil
		}
		return &v
	}
	u.refused = read(c.pids, "pids.events", "max")
	u.oomKills = read(c.memory, c.memoryFiles.oomEvents, "oom_kill")
	if peaks {
		u.pidsPeak = read(c.pids, "pids.peak", "")
		u.memoryPeak = read(c.memory, c.memoryFiles.memoryPeak, "")
	}
	return u
}

// exceeded names the cap the jail reached: ReasonPidsLimit once a fork
// was refused (pids.events "max"), ReasonMemoryLimit once the kernel
// killed a process for memory (oom_kill); "" for neither.
func (u cgroupUsage) exceeded() string {
	switch {
	case u.oomKills != nil && *u.oomKills > 0:
		return ReasonMemoryLimit
	case u.refused != nil && *u.refused > 0:
		return ReasonPidsLimit
	}
	return ""
}

// kill ends every process in the run's cgroup v2 at once (cgroup.kill),
// processes that left the jail's process group included; v1 has no such
// file: the pid namespace's teardown and end do it there.
func (c *runCgroup) kill() {
	if c.dir != "" {
		os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	}
}

// ownCgroup is the directory of agentjail's own cgroup v2, "" without one,
// from its /proc/self/cgroup. With the real /proc the usual mount points
// are tried first (statfs: one system call each); only then is mountinfo
// parsed. A fixture's mount table (tests) is the only one it has.
func ownCgroup(procRoot, own string) string {
	rel, ok := OwnCgroupPath(own)
	if !ok {
		return ""
	}
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if procRoot == "/proc" && unix.Statfs(mnt, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return filepath.Join(mnt, rel)
		}
	}
	return CgroupDir(readMountinfo(procRoot), rel)
}

func readMountinfo(procRoot string) []mounts.Mount {
	f, err := os.Open(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return []mounts.Mount{}
	}
	defer f.Close()
	table, err := mounts.ParseMountinfo(f)
	if err != nil {
		return []mounts.Mount{}
	}
	return table
}

// HostMemory returns the host's RAM and swap in bytes (/proc/meminfo under
// procRoot; 0 when it cannot be read).
func HostMemory(procRoot string) (ram, swap int64) {
	return parseMeminfo(readString(filepath.Join(procRoot, "meminfo")))
}

// end kills whatever is still in the cgroups, waits (at most d) until they
// are empty, removes them and returns the processes it found there.
func (c *runCgroup) end(procRoot string, d time.Duration) ([]Proc, error) {
	var left []Proc
	var errs []error
	if c.fd >= 0 {
		unix.Close(c.fd)
	}
	if c.dir != "" {
		procs, err := killCgroup(c.dir, procRoot, d)
		left, errs = append(left, procs...), append(errs, err)
	}
	for _, dir := range c.v1 {
		procs, err := killCgroupV1(dir, procRoot, d)
		left, errs = append(left, procs...), append(errs, err)
	}
	return left, errors.Join(errs...)
}

// dirs lists the run's cgroup directories, v2 first.
func (c *runCgroup) dirs() (v2 string, v1 []string) {
	for _, name := range slices.Sorted(maps.Keys(c.v1)) {
		v1 = append(v1, c.v1[name])
	}
	return c.dir, v1
}

// killCgroup writes cgroup.kill in dir, waits (at most d) until the cgroup
// is empty and removes it; it returns the processes it held.
func killCgroup(dir, procRoot string, d time.Duration) ([]Proc, error) {
	var left []Proc
	procs := strings.Fields(readString(filepath.Join(dir, "cgroup.procs")))
	for _, f := range procs {
		if pid, err := strconv.Atoi(f); err == nil {
			if p, err := readProc(procRoot, pid); err == nil && !zombie(procRoot, pid) {
				left = append(left, p)
			}
		}
	}
	// An empty cgroup (the usual end: the pid namespace is gone) is only
	// removed; EBUSY means a process entered it meanwhile.
	if len(procs) == 0 && os.Remove(dir) == nil {
		return nil, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return left, fmt.Errorf("cgroup.kill in %s: %w", dir, err)
	}
	deadline := time.Now().Add(d)
	for !bytes.Contains([]byte(readString(filepath.Join(dir, "cgroup.events"))), []byte("populated 0")) {
		if time.Now().After(deadline) {
			return left, fmt.Errorf("cgroup %s still holds processes %v after cgroup.kill", dir, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := os.Remove(dir); err != nil {
		return left, fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return left, nil
}

// killCgroupV1 is killCgroup for a cgroup v1 directory, which has no
// cgroup.kill: each process it lists is SIGKILLed through a pidfd taken
// before it is found in the list again (only the jail's processes can
// enter it, so a pid reused meanwhile is one of the jail's too, or not in
// the list), until the list is empty or d has passed; then it is removed.
func killCgroupV1(dir, procRoot string, d time.Duration) ([]Proc, error) {
	var left []Proc
	listed := func() []int {
		var pids []int
		for _, f := range strings.Fields(readString(filepath.Join(dir, "cgroup.procs"))) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	deadline := time.Now().Add(d)
	for {
		live := 0
		for _, pid := range listed() {
			p, err := readProc(procRoot, pid)
			if err != nil || zombie(procRoot, pid) {
				continue
			}
			live++
			if ok, _ := killHeld(procRoot, p, func(Proc) bool { return slices.Contains(listed(), pid) }); ok && !slices.ContainsFunc(left, func(o Proc) bool { return o.PID == pid }) {
				left = append(left, p)
			}
		}
		// EBUSY: a process not yet reaped, or one forked meanwhile.
		err := os.Remove(dir)
		switch {
		case live == 0 && (err == nil || errors.Is(err, os.ErrNotExist)):
			return left, nil
		case time.Now().After(deadline):
			return left, fmt.Errorf("cgroup %s still holds processes %v after SIGKILL: %w", dir, d, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

package supervise

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
	"golang.org/x/sys/unix"
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
	// refusedFile and oomFile are the counters polled while the run
	// lasts, held open once read.
	refusedFile, oomFile counterFile
}

// counterFile is a cgroup counter file held open: each poll is one
// pread(2) at offset 0, which regenerates its text. os.ReadFile would
// take eight more system calls, and register the file with Go's poller
// (cgroup files can be polled), waking another of its threads each
// time.
type counterFile struct {
	fd   int
	open bool
}

// read returns path's text, opening it on the first read that finds it.
func (f *counterFile) read(path string) string {
	if !f.open {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return ""
		}
		f.fd, f.open = fd, true
	}
	var buf [512]byte
	n, err := unix.Pread(f.fd, buf[:], 0)
	if err != nil || n < 0 {
		return ""
	}
	return string(buf[:n])
}

func (f *counterFile) close() {
	if f.open {
		unix.Close(f.fd)
		f.open = false
	}
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
func makeCgroup(procRoot, runID string, want cgroupLimits) (*runCgroup, []record.Note) {
	c := &runCgroup{fd: -1, v1: map[string]string{}}
	var notes []record.Note
	asked := map[string]int64{"pids": want.pids, "memory": want.memory}
	controllers := []string{}
	for _, name := range []string{"pids", "memory"} {
		if asked[name] > 0 {
			controllers = append(controllers, name)
		}
	}
	own := procs.ReadString(filepath.Join(procRoot, "self/cgroup"))
	// notInV2 says why a controller is not taken from cgroup v2.
	notInV2 := map[string]string{}
	for _, name := range controllers {
		notInV2[name] = "no cgroup v2 is mounted"
	}
	if base := ownCgroup(procRoot, own); base == "" {
		notes = append(notes, record.Note{What: "cgroup", Detail: "no cgroup v2 hierarchy is mounted: " + noKill})
	} else {
		parent := filepath.Join(base, "agentjail")
		dir := filepath.Join(parent, runID)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			notes = append(notes, record.Note{What: "cgroup", Detail: fmt.Sprintf("cannot create %s: %v; %s", parent, err, noKill)})
			for _, name := range controllers {
				notInV2[name] = fmt.Sprintf("cannot create %s", parent)
			}
		} else {
			available := strings.Fields(procs.ReadString(filepath.Join(parent, "cgroup.controllers")))
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
				notes = append(notes, record.Note{What: "cgroup", Detail: fmt.Sprintf("cannot create %s: %v; %s", dir, err, noKill)})
			} else if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				os.Remove(dir)
				notes = append(notes, record.Note{What: "cgroup", Detail: fmt.Sprintf("cannot open %s: %v; %s", dir, err, noKill)})
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
	var table []procs.Mount // read once, when a v1 hierarchy is looked for
	for _, name := range controllers {
		dir, files := c.dir, v2Files
		if _, lacks := notInV2[name]; lacks {
			if table == nil {
				table = readMountinfo(procRoot)
			}
			var err error
			if dir, err = makeV1(table, own, name, runID); err != nil {
				notes = append(notes, record.Note{What: "cgroup." + name, Detail: fmt.Sprintf("no %s controller for the run (cgroup v2: %s; v1: %v): %s", name, notInV2[name], err, unheld[name])})
				continue
			}
			c.v1[name], files = dir, v1Files
		}
		if err := c.set(name, dir, files, want); err != nil {
			notes = append(notes, record.Note{What: "cgroup." + name, Detail: fmt.Sprintf("%v: %s", err, unheld[name])})
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
func makeV1(table []procs.Mount, own, controller, runID string) (string, error) {
	rel, ok := procs.OwnCgroupV1Path(own, controller)
	base := procs.CgroupV1Dir(table, rel, controller)
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
func (c *runCgroup) setMemoryExtras(procRoot string, files limitFiles, swap int64) []record.Note {
	var notes []record.Note
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
		if _, hostSwap := procs.HostMemory(procRoot); hostSwap > 0 {
			notes = append(notes, record.Note{What: "cgroup.swap", Detail: fmt.Sprintf("cannot set %s: %v: the jail may swap out beyond limits.memory, up to the host's %d bytes of swap", p, err, hostSwap)})
		}
	}
	if files == v2Files {
		if err := os.WriteFile(filepath.Join(c.memory, "memory.oom.group"), []byte("1"), 0); err != nil {
			notes = append(notes, record.Note{What: "cgroup.memory", Detail: fmt.Sprintf("cannot set memory.oom.group: %v: an OOM kill ends one process; agentjail ends the rest when it sees it (within %v)", err, limitPoll)})
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
		err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if errors.Is(err, syscall.ESRCH) {
			return errSandboxGone // it failed a mount meanwhile: bwrap's exit says why
		}
		if err != nil {
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
	// read reads a counter of dir: from held, when one is given.
	read := func(dir, file, key string, held *counterFile) *int64 {
		if dir == "" {
			return nil
		}
		var text string
		if held != nil {
			text = held.read(filepath.Join(dir, file))
		} else {
			text = procs.ReadString(filepath.Join(dir, file))
		}
		v, ok := procs.FlatKeyed(text, key)
		if key == "" { // a file of one number
			n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			v, ok = n, err == nil
		}
		if !ok {
			return nil
		}
		return &v
	}
	u.refused = read(c.pids, "pids.events", "max", &c.refusedFile)
	u.oomKills = read(c.memory, c.memoryFiles.oomEvents, "oom_kill", &c.oomFile)
	if peaks {
		u.pidsPeak = read(c.pids, "pids.peak", "", nil)
		u.memoryPeak = read(c.memory, c.memoryFiles.memoryPeak, "", nil)
	}
	return u
}

// exceeded names the cap the jail reached: record.ReasonPidsLimit once a fork
// was refused (pids.events "max"), record.ReasonMemoryLimit once the kernel
// killed a process for memory (oom_kill); "" for neither.
func (u cgroupUsage) exceeded() string {
	switch {
	case u.oomKills != nil && *u.oomKills > 0:
		return record.ReasonMemoryLimit
	case u.refused != nil && *u.refused > 0:
		return record.ReasonPidsLimit
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
	rel, ok := procs.OwnCgroupPath(own)
	if !ok {
		return ""
	}
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if procRoot == "/proc" && unix.Statfs(mnt, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return filepath.Join(mnt, rel)
		}
	}
	return procs.CgroupDir(readMountinfo(procRoot), rel)
}

func readMountinfo(procRoot string) []procs.Mount {
	f, err := os.Open(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return []procs.Mount{}
	}
	defer f.Close()
	table, err := procs.ParseMountinfo(f)
	if err != nil {
		return []procs.Mount{}
	}
	return table
}

// end kills whatever is still in the cgroups, waits (at most d) until they
// are empty, removes them and returns the processes it found there.
func (c *runCgroup) end(procRoot string, d time.Duration) ([]procs.Proc, error) {
	var left []procs.Proc
	var errs []error
	if c.fd >= 0 {
		unix.Close(c.fd)
	}
	c.refusedFile.close()
	c.oomFile.close()
	if c.dir != "" {
		procs, err := procs.KillCgroup(c.dir, procRoot, d)
		left, errs = append(left, procs...), append(errs, err)
	}
	for _, dir := range c.v1 {
		procs, err := procs.KillCgroupV1(dir, procRoot, d)
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

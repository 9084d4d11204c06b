package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/mounts"
)

// runCgroup is a run's own cgroup v2. bwrap is cloned straight into it
// (CLONE_INTO_CGROUP, Go's SysProcAttr.UseCgroupFD), so every process of
// the jail is in it from the first instruction, and cgroup.kill (Linux
// 5.14) ends them all at once. The run user cannot move a process out: that
// needs write access to a common ancestor's cgroup.procs (cgroups(7)).
type runCgroup struct {
	dir       string
	fd        int
	pidsMax   *int64
	memoryMax *int64
}

// makeCgroup creates <agentjail's cgroup>/agentjail/<runID>, and sets
// pids.max and memory.max where the hierarchy offers those controllers
// (values of 0: not asked). What it cannot do comes back as degradations;
// with no cgroup at all the pid namespace's teardown and the marker sweep
// still end the run.
func makeCgroup(procRoot, runID string, pidsMax, memoryMax int64) (*runCgroup, []Note) {
	base := ownCgroup(procRoot)
	if base == "" {
		return nil, []Note{{"cgroup", "no cgroup v2 hierarchy is mounted: the run has no cgroup of its own; the pid namespace's teardown (or, without one, agentjail killing what is left below it) and the marker sweep end it"}}
	}
	parent := filepath.Join(base, "agentjail")
	dir := filepath.Join(parent, runID)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, []Note{{"cgroup", fmt.Sprintf("cannot create %s: %v; the run has no cgroup of its own: the pid namespace's teardown (or, without one, agentjail killing what is left below it) and the marker sweep end it", parent, err)}}
	}
	var notes []Note
	available := strings.Fields(readString(filepath.Join(parent, "cgroup.controllers")))
	enabled := map[string]bool{}
	for _, c := range []struct {
		name  string
		asked int64
	}{{"pids", pidsMax}, {"memory", memoryMax}} {
		if c.asked <= 0 {
			continue // nothing to set: a missing controller degrades nothing
		}
		if !slices.Contains(available, c.name) {
			notes = append(notes, Note{"cgroup." + c.name, fmt.Sprintf("%s offers no %s controller: %s.max is not set (the rlimit alone applies)", parent, c.name, c.name)})
			continue
		}
		// Enabling a controller for the children of our own "agentjail"
		// cgroup is allowed: it holds no processes (cgroups(7), "no
		// internal processes" rule).
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+c.name), 0); err != nil {
			notes = append(notes, Note{"cgroup." + c.name, fmt.Sprintf("cannot enable the %s controller in %s: %v", c.name, parent, err)})
			continue
		}
		enabled[c.name] = true
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, append(notes, Note{"cgroup", fmt.Sprintf("cannot create %s: %v; the run has no cgroup of its own: the pid namespace's teardown (or, without one, agentjail killing what is left below it) and the marker sweep end it", dir, err)})
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, append(notes, Note{"cgroup", fmt.Sprintf("cannot open %s: %v", dir, err)})
	}
	cg := &runCgroup{dir: dir, fd: fd}
	for _, l := range []struct {
		controller string
		v          int64
		dst        **int64
	}{{"pids", pidsMax, &cg.pidsMax}, {"memory", memoryMax, &cg.memoryMax}} {
		if !enabled[l.controller] {
			continue // not asked, or noted above
		}
		if err := os.WriteFile(filepath.Join(dir, l.controller+".max"), []byte(strconv.FormatInt(l.v, 10)), 0); err != nil {
			notes = append(notes, Note{"cgroup." + l.controller, fmt.Sprintf("cannot set %s.max: %v", l.controller, err)})
			continue
		}
		v := l.v
		*l.dst = &v
	}
	return cg, notes
}

// ownCgroup is the directory of agentjail's own cgroup v2, "" without one.
// The usual mount points are tried first (statfs: one system call each);
// only then is mountinfo parsed.
func ownCgroup(procRoot string) string {
	own, err := os.ReadFile(filepath.Join(procRoot, "self/cgroup"))
	if err != nil {
		return ""
	}
	rel, ok := OwnCgroupPath(string(own))
	if !ok {
		return ""
	}
	for _, mnt := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st unix.Statfs_t
		if unix.Statfs(mnt, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return filepath.Join(mnt, rel)
		}
	}
	f, err := os.Open(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return ""
	}
	defer f.Close()
	table, err := mounts.ParseMountinfo(f)
	if err != nil {
		return ""
	}
	return CgroupDir(table, rel)
}

// end kills whatever is still in the cgroup, waits (at most d) until it is
// empty, removes it and returns the processes it found there.
func (c *runCgroup) end(procRoot string, d time.Duration) ([]Proc, error) {
	unix.Close(c.fd)
	return killCgroup(c.dir, procRoot, d)
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

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

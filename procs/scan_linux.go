package procs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// MarkerVar is the environment variable that marks every process of a run
// with its run id. It is in bwrap's own environment and so in every process
// of the jail (/proc/PID/environ shows the environment at exec time).
const MarkerVar = "AGENTJAIL_RUN"

// Proc is a process found carrying a run marker.
type Proc struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Cmd  string `json:"cmd"`
	// Start is the process's start time in clock ticks since boot
	// (proc(5), /proc/PID/stat field 22): with the pid it names one process
	// for good, since a reused pid never has the same start time.
	Start uint64 `json:"-"`
	RunID string `json:"-"`
}

// Marked lists every process under procRoot (normally /proc) whose
// environment carries MarkerVar, grouped by run id. Processes that vanish
// or cannot be read (another user's, for a caller without root) are
// skipped: the scan is the fallback and the audit, never the primary kill.
//
// `agentjail init` calls it for its periodic sweep: a run id whose state
// file (Runs) names no live supervisor marks processes left behind by a
// supervisor that died.
func Marked(procRoot string) (map[string][]Proc, error) {
	return scan(procRoot, "")
}

// MarkedBy lists the processes under procRoot carrying exactly runID,
// looking only at those created after since (a zero Since: at all).
func MarkedBy(procRoot, runID string, since Since) ([]Proc, error) {
	m, err := scanIf(procRoot, runID, since.filter(procRoot))
	return m[runID], err
}

func scan(procRoot, only string) (map[string][]Proc, error) { return scanIf(procRoot, only, nil) }

// scanIf walks procRoot's numeric entries, those keep accepts (nil: all).
// With only set, processes carrying another run id are not examined
// further.
func scanIf(procRoot, only string, keep func(pid int) bool) (map[string][]Proc, error) {
	dir, err := os.Open(procRoot)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	if keep != nil {
		names = slices.DeleteFunc(names, func(name string) bool {
			pid, err := strconv.Atoi(name)
			return err != nil || !keep(pid)
		})
	}
	dirfd := int(dir.Fd())
	// Opening and reading another process's environment is kernel work:
	// on a host with many processes the scan is split across the CPUs,
	// this goroutine taking one share (on a small host waking another
	// thread would cost more than it saves).
	workers := min(runtime.GOMAXPROCS(0), 1+len(names)/256)
	found := make([][]Proc, workers)
	share := func(w int) {
		buf := make([]byte, 8<<10)
		for i := w; i < len(names); i += workers {
			name := names[i]
			if name[0] < '0' || name[0] > '9' {
				continue
			}
			var id string
			id, buf = readMarkerAt(dirfd, name+"/environ", buf)
			if id == "" || only != "" && id != only {
				continue
			}
			pid, err := strconv.Atoi(name)
			if err != nil {
				continue
			}
			p, err := ReadProc(procRoot, pid)
			if err != nil {
				continue // gone meanwhile
			}
			p.RunID = id
			found[w] = append(found[w], p)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { share(w) })
	}
	share(0)
	wg.Wait()
	out := map[string][]Proc{}
	for _, ps := range found {
		for _, p := range ps {
			out[p.RunID] = append(out[p.RunID], p)
		}
	}
	return out, nil
}

// readMarker returns the value of MarkerVar in an environ file ("" when
// absent or unreadable), growing buf as needed; it returns buf for reuse.
func readMarker(path string, buf []byte) (string, []byte) {
	return readMarkerAt(unix.AT_FDCWD, path, buf)
}

// readMarkerAt is readMarker relative to a directory fd. Raw system calls
// keep a sweep of thousands of processes cheap (os.Open would also try to
// register every file with the poller).
func readMarkerAt(dirfd int, path string, buf []byte) (string, []byte) {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", buf
	}
	defer unix.Close(fd)
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
	return MarkerIn(buf[:n]), buf
}

// MarkerIn finds MarkerVar=VALUE as a whole entry of a NUL-separated
// environment block: "XAGENTJAIL_RUN=" or a value inside another variable
// does not count.
func MarkerIn(env []byte) string {
	key := []byte(MarkerVar + "=")
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if v, ok := bytes.CutPrefix(entry, key); ok && len(v) > 0 {
			return string(v)
		}
	}
	return ""
}

// ReadProc reads a process's parent, start time and command line.
func ReadProc(procRoot string, pid int) (Proc, error) {
	base := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(base, "stat"))
	if err != nil {
		return Proc{}, err
	}
	st, err := ParseStat(stat)
	if err != nil {
		return Proc{}, err
	}
	p := Proc{PID: pid, PPID: st.PPID, Start: st.Start}
	if cmd, err := os.ReadFile(filepath.Join(base, "cmdline")); err == nil {
		p.Cmd = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	if p.Cmd == "" {
		// Kernel threads and zombies have no command line; show the comm.
		p.Cmd = "[" + st.Comm + "]"
	}
	return p, nil
}

// ancestors returns pid and every ancestor of it up to PID 1 under
// procRoot: the processes a sweep must never signal.
func ancestors(procRoot string, pid int) map[int]bool {
	out := map[int]bool{1: true}
	for pid > 1 && !out[pid] {
		out[pid] = true
		p, err := ReadProc(procRoot, pid)
		if err != nil {
			break
		}
		pid = p.PPID
	}
	return out
}

// Descendants lists the live processes below pid in procRoot's process
// tree, parents before children (zombies left out).
func Descendants(procRoot string, pid int) ([]Proc, error) {
	names, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	children := map[int][]Proc{}
	for _, e := range names {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := ReadProc(procRoot, n); err == nil && !Zombie(procRoot, n) {
			children[p.PPID] = append(children[p.PPID], p)
		}
	}
	var out []Proc
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0].PID]...)
	}
	return out, nil
}

// Held is a process held by a pidfd: what was read of it after the pidfd
// was opened (its stat) belongs to it, and a signal sent through FD reaches
// it or nothing, never a process that reused its pid (pidfd_open(2)).
type Held struct {
	PID, FD int
	Stat
}

// Below returns the live processes below root in procRoot's process tree,
// parents before children, looking only at those created after since (a
// zero Since: at all). rootFD is a pidfd of root, or -1 when root is the
// caller. Each is held by a pidfd opened before its parent was read again
// and found alive, so it is a descendant. Zombies are left out: they have
// no children (exit re-parents them). The caller closes the pidfds
// (Release).
func Below(procRoot string, root, rootFD int, since Since) ([]Held, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	keep := since.filter(procRoot)
	kids := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || keep != nil && !keep(pid) {
			continue
		}
		if st, err := ReadStat(procRoot, pid); err == nil {
			kids[st.PPID] = append(kids[st.PPID], pid)
		}
	}
	tree := []Held{{PID: root, FD: rootFD}}
	for i := 0; i < len(tree); i++ {
		parent := tree[i]
		for _, pid := range kids[parent.PID] {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // gone already
			}
			st, err := ReadStat(procRoot, pid)
			if err != nil || st.PPID != parent.PID || st.State == 'Z' || parent.FD >= 0 && unix.PidfdSendSignal(parent.FD, 0, nil, 0) != nil {
				unix.Close(fd)
				continue
			}
			tree = append(tree, Held{PID: pid, FD: fd, Stat: st})
		}
	}
	return tree[1:], nil
}

// Release closes the pidfds of held.
func Release(held []Held) {
	for _, h := range held {
		unix.Close(h.FD)
	}
}

package runstate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
)

// State is a live run's state file, DIR/ID.json, written when the run
// starts and removed when it ends. A state file whose supervisor is gone
// (Alive false) marks a run whose supervisor died: `agentjail init` sweeps
// its processes (Marked, KillMarked).
type State struct {
	RunID   string `json:"run_id"`
	Profile string `json:"profile"`
	// PID is the supervisor's (agentjail run's) pid and PIDStart its start
	// time in clock ticks (proc(5) stat field 22), so that a reused pid is
	// never taken for it.
	PID      int    `json:"pid"`
	PIDStart uint64 `json:"pid_start"`
	// PIDNS is the supervisor's pid namespace ("pid:[inode]"): a pid means
	// something only there. A sweeper in another pid namespace (an
	// `agentjail init` in a container sharing /run/agentjail with the host)
	// must not take the run for dead.
	PIDNS     string      `json:"pid_ns,omitempty"`
	StartedAt record.Time `json:"started_at"`
	// Socket is the run's control socket (status, stop).
	Socket string `json:"socket"`
	// StopWaitMS bounds how long a stop may take: grace, then the wait
	// after SIGKILL.
	StopWaitMS int64        `json:"stop_wait_ms"`
	User       *record.User `json:"user"`
	// Cgroup is the run's cgroup directory, "" when it has none.
	Cgroup string `json:"cgroup"`
	// CgroupsV1 are the run's cgroup v1 directories (where the host keeps
	// the pids or memory controller on cgroup v1).
	CgroupsV1 []string `json:"cgroups_v1,omitempty"`
	// Stage is the run's staging directory (Stage), "" when it has none;
	// a sweep removes it with the rest.
	Stage string `json:"stage,omitempty"`

	// Alive is computed by Runs, not stored.
	Alive bool `json:"-"`
	// Foreign: the supervisor lives in another pid namespace than the
	// procfs Runs read, so whether it is alive cannot be told from there.
	// Computed by Runs, not stored.
	Foreign bool `json:"-"`
}

// Status is what `agentjail ps` shows of a live run.
type Status struct {
	RunID     string       `json:"run_id"`
	Profile   string       `json:"profile"`
	PID       int          `json:"pid"`
	ChildPID  int          `json:"child_pid"`
	StartedAt record.Time  `json:"started_at"`
	IdleMS    int64        `json:"idle_ms"`
	Bytes     record.Bytes `json:"bytes"`
}

// Live is a published live run: its state file and control socket.
type Live struct {
	dir   string
	state State
	stops chan struct{}

	mu     sync.Mutex
	status func() Status
	final  *record.Record
	done   chan struct{}
	conns  sync.WaitGroup
	ln     *net.UnixListener // nil until open
}

// NewLive prepares a live run whose state lives in dir. Run opens its
// control socket and writes its state file once bwrap has started, while
// bwrap sets the jail up; Close removes both.
func NewLive(dir string, st State) *Live {
	return &Live{dir: dir, state: st, stops: make(chan struct{}, 1), done: make(chan struct{})}
}

// open creates dir (0700: only the supervisor's user may query or stop
// its runs), listens on the run's control socket and writes the state
// file, naming the run's cgroups (v2: "" for none).
func (l *Live) Open(cgroup string, v1 []string) error {
	if fi, err := os.Stat(l.dir); err != nil || fi.Mode().Perm() != 0o700 {
		if err := os.MkdirAll(l.dir, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(l.dir, 0o700); err != nil {
			return err
		}
	}
	st := l.state
	st.PID, st.Cgroup, st.CgroupsV1 = os.Getpid(), cgroup, v1
	// Without its start time a state file would tell every sweeper that
	// this live run is dead: publish none rather than that.
	p, err := procs.ReadProc("/proc", st.PID)
	if err != nil {
		return fmt.Errorf("read agentjail's own start time: %w", err)
	}
	st.PIDStart = p.Start
	st.PIDNS = pidNamespace("/proc", "self")
	st.Socket = filepath.Join(l.dir, st.RunID+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: st.Socket, Net: "unix"})
	if err != nil {
		return err
	}
	if err := writeJSON(l.statePath(), st); err != nil {
		ln.Close()
		return err
	}
	l.mu.Lock()
	l.state, l.ln = st, ln
	l.mu.Unlock()
	go l.serve(ln)
	return nil
}

func (l *Live) statePath() string { return filepath.Join(l.dir, l.state.RunID+".json") }

// Stops delivers a request from `agentjail stop`.
func (l *Live) Stops() <-chan struct{} { return l.stops }

func (l *Live) SetStatus(f func() Status) {
	l.mu.Lock()
	l.status = f
	l.mu.Unlock()
}

// Close removes the state file and the socket, then answers waiting stop
// requests with the run's outcome: a stop that returns finds the run gone.
func (l *Live) Close(rec *record.Record) {
	l.mu.Lock()
	l.final = rec
	ln := l.ln
	l.mu.Unlock()
	if ln == nil {
		return // never opened
	}
	os.Remove(l.state.Socket)
	os.Remove(l.statePath())
	ln.Close()
	close(l.done)
	waited := make(chan struct{})
	go func() { l.conns.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Second):
	}
}

// request and reply are the control protocol: one JSON line each way.
type request struct {
	Op string `json:"op"` // "status" or "stop"
}

type reply struct {
	Status   *Status `json:"status,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	ExitCode *int    `json:"exit_code,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func (l *Live) serve(ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		l.conns.Add(1)
		go func() {
			defer l.conns.Done()
			defer c.Close()
			l.handle(c)
		}()
	}
}

func (l *Live) handle(c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var req request
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		return
	}
	enc := json.NewEncoder(c)
	switch req.Op {
	case "status":
		l.mu.Lock()
		f := l.status
		l.mu.Unlock()
		st := Status{RunID: l.state.RunID, Profile: l.state.Profile, PID: l.state.PID, StartedAt: l.state.StartedAt}
		if f != nil {
			st = f()
		}
		enc.Encode(reply{Status: &st})
	case "stop":
		select {
		case l.stops <- struct{}{}:
		default: // a stop is already pending
		}
		<-l.done
		l.mu.Lock()
		rec := l.final
		l.mu.Unlock()
		r := reply{}
		if rec != nil {
			r.Reason, r.ExitCode = rec.Reason, &rec.ExitCode
		}
		enc.Encode(r)
	default:
		enc.Encode(reply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

// Runs lists the state files in dir, each marked Alive when its supervisor
// still runs (same pid and start time under procRoot).
func Runs(dir, procRoot string) ([]State, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []State
	// The namespace procRoot numbers: its pid 1's, or, where that link is
	// not ours to read (a root without CAP_SYS_PTRACE over PID 1, as in
	// many containers), our own, which it is whenever procRoot is our
	// procfs. A state of another namespace, or of one that cannot be told,
	// is never taken for dead: its pid means nothing here.
	here := pidNamespace(procRoot, "1")
	if here == "" {
		here = pidNamespace(procRoot, "self")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // removed meanwhile
		}
		var st State
		if json.Unmarshal(data, &st) != nil || st.RunID == "" {
			continue
		}
		if st.PIDNS != "" && st.PIDNS != here {
			st.Foreign = true
			out = append(out, st)
			continue
		}
		p, err := procs.ReadProc(procRoot, st.PID)
		st.Alive = err == nil && p.Start == st.PIDStart && !procs.Zombie(procRoot, st.PID)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b State) int { return time.Time(a.StartedAt).Compare(time.Time(b.StartedAt)) })
	return out, nil
}

// pidNamespace names the pid namespace of process pid ("self", "1") as
// procRoot shows it, or "" when it cannot be read (fixture trees, no
// permission). The namespace of procRoot's pid 1 is the one its pids
// number.
func pidNamespace(procRoot, pid string) string {
	ns, err := os.Readlink(filepath.Join(procRoot, pid, "ns", "pid"))
	if err != nil {
		return ""
	}
	return ns
}

// SweepDead ends what runs whose supervisor died (a state file in dir
// whose supervisor no longer runs) left behind: every process still
// carrying their marker, their cgroup, their staging directory (with the
// copied credentials), their state file and socket. It
// returns the processes it killed, by run id. `agentjail init` calls it
// periodically; a supervisor that was SIGKILLed leaves no jailed process
// (bwrap's --die-with-parent), but may leave these files and an empty
// cgroup.
//
// Marked processes of a run id with no state file in dir are left alone:
// another user's supervisor keeps its state elsewhere, and only the state
// file tells a dead run from a live one. So are runs whose supervisor lives
// in another pid namespace than procRoot's (State.Foreign): their pids mean
// nothing here.
func SweepDead(dir, procRoot string) (map[string][]procs.Proc, error) {
	runs, err := Runs(dir, procRoot)
	if err != nil {
		return nil, err
	}
	out := map[string][]procs.Proc{}
	var errs []error
	for _, st := range runs {
		if st.Alive || st.Foreign {
			continue
		}
		killed, err := procs.KillMarked(procRoot, st.RunID)
		if err != nil {
			errs = append(errs, err)
		}
		if st.Cgroup != "" {
			left, err := procs.KillCgroup(st.Cgroup, procRoot, time.Second)
			killed = append(killed, left...)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		for _, dir := range st.CgroupsV1 {
			left, err := procs.KillCgroupV1(dir, procRoot, time.Second)
			killed = append(killed, left...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(killed) > 0 {
			out[st.RunID] = killed
		}
		if st.Stage != "" {
			if err := hostfs.RemoveStage(st.Stage); err != nil {
				// The state file stays: it is what leads the next sweep
				// (and the operator) to the staged credentials.
				errs = append(errs, err)
				continue
			}
		}
		os.Remove(st.Socket)
		os.Remove(filepath.Join(dir, st.RunID+".json"))
	}
	return out, errors.Join(errs...)
}

// Find returns the live run whose id is id or starts with it.
func Find(dir, procRoot, id string) (State, error) {
	runs, err := Runs(dir, procRoot)
	if err != nil {
		return State{}, err
	}
	var match []State
	for _, st := range runs {
		if st.Alive && (st.RunID == id || id != "" && strings.HasPrefix(st.RunID, id)) {
			if st.RunID == id {
				return st, nil
			}
			match = append(match, st)
		}
	}
	switch len(match) {
	case 0:
		return State{}, fmt.Errorf("%w: %q", ErrUnknownRun, id)
	case 1:
		return match[0], nil
	}
	return State{}, fmt.Errorf("%w: %q", ErrAmbiguousRun, id)
}

// Query asks a live run for its status.
func Query(st State) (Status, error) {
	r, err := call(st, "status", 5*time.Second)
	if err != nil {
		return Status{}, err
	}
	if r.Status == nil {
		return Status{}, fmt.Errorf("run %s: no status in the reply", st.RunID)
	}
	return *r.Status, nil
}

// Stop asks a live run to stop (SIGTERM, grace, SIGKILL, as a timeout
// would) and waits until it has ended; it returns the run's reason and
// exit code.
func Stop(st State) (string, int, error) {
	r, err := call(st, "stop", time.Duration(st.StopWaitMS)*time.Millisecond+30*time.Second)
	if err != nil {
		return "", 0, err
	}
	if r.ExitCode == nil {
		return "", 0, fmt.Errorf("run %s ended without an outcome", st.RunID)
	}
	return r.Reason, *r.ExitCode, nil
}

func call(st State, op string, wait time.Duration) (reply, error) {
	c, err := net.DialTimeout("unix", st.Socket, 5*time.Second)
	if err != nil {
		return reply{}, fmt.Errorf("run %s: %w", st.RunID, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if err := json.NewEncoder(c).Encode(request{Op: op}); err != nil {
		return reply{}, fmt.Errorf("run %s: %w", st.RunID, err)
	}
	var r reply
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &r)
	}
	if err != nil {
		return reply{}, fmt.Errorf("run %s: no answer: %w", st.RunID, err)
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

// writeJSON writes v to path atomically (temporary file, rename).
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}

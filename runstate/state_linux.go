package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// AgentHomes is the run's agent-homes directory (hostfs.AgentHomes),
	// "" when it has none; a sweep removes it with the rest. Written under
	// two keys (MarshalJSON).
	AgentHomes string `json:"homes,omitempty"`

	// Alive is computed by Runs, not stored.
	Alive bool `json:"-"`
	// Foreign: the supervisor lives in another pid namespace than the
	// procfs Runs read, so whether it is alive cannot be told from there.
	// Computed by Runs, not stored.
	Foreign bool `json:"-"`
}

// MarshalJSON writes AgentHomes under "homes" and under "stage", its key in
// earlier builds: `agentjail init`, a binary of its own and long running,
// may be of an earlier build than the agentjail whose dead run it sweeps
// (during an upgrade), and without its key would remove the state file and
// leave the run's agent homes, with the copied credentials, where nothing leads
// to them.
func (s State) MarshalJSON() ([]byte, error) {
	type plain State // without these methods
	return json.Marshal(struct {
		plain
		Stage string `json:"stage,omitempty"`
	}{plain(s), s.AgentHomes})
}

// UnmarshalJSON reads AgentHomes from "homes", or from "stage" in a state file
// an earlier build wrote (see MarshalJSON).
func (s *State) UnmarshalJSON(data []byte) error {
	type plain State
	var v struct {
		plain
		Stage string `json:"stage"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*s = State(v.plain)
	if s.AgentHomes == "" {
		s.AgentHomes = v.Stage
	}
	return nil
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
	here := PIDNamespace(procRoot, "1")
	if here == "" {
		here = PIDNamespace(procRoot, "self")
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
func PIDNamespace(procRoot, pid string) string {
	ns, err := os.Readlink(filepath.Join(procRoot, pid, "ns", "pid"))
	if err != nil {
		return ""
	}
	return ns
}

// SweepDead ends what runs whose supervisor died (a state file in dir
// whose supervisor no longer runs) left behind: every process still
// carrying their marker, their cgroup, their agent-homes directory (with the
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
		if st.AgentHomes != "" {
			if err := hostfs.RemoveAgentHomes(st.AgentHomes); err != nil {
				// The state file stays: it is what leads the next sweep
				// (and the operator) to the copied credentials.
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
		return State{}, fmt.Errorf("%w: %q among uid %d's (ps and stop see only the runs of the user who asks: stop another user's as that user)", ErrUnknownRun, id, os.Getuid())
	case 1:
		return match[0], nil
	}
	return State{}, fmt.Errorf("%w: %q", ErrAmbiguousRun, id)
}

// WriteJSON writes v to path atomically (temporary file, rename).
func WriteJSON(path string, v any) error {
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

// StatePath is the state file of run id in dir.
func StatePath(dir, id string) string { return filepath.Join(dir, id+".json") }

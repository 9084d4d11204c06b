// Package live is the live registry of one agentjail user's runs: each
// run's state file and control socket in the run directory, which
// `agentjail ps` lists and `agentjail stop` asks to end a run. runstate's
// sweep reads it to find the runs whose supervisor died.
package live

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
)

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
	state runstate.State
	stops chan struct{}

	mu     sync.Mutex
	status func() Status
	final  *record.Record
	done   chan struct{}
	conns  sync.WaitGroup
	ln     *net.UnixListener // nil until open
}

// New prepares a live run whose state lives in dir. Run opens its
// control socket and writes its state file once bwrap has started, while
// bwrap sets the jail up; Close removes both.
func New(dir string, st runstate.State) *Live {
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
	st.PIDNS = runstate.PIDNamespace("/proc", "self")
	st.Socket = filepath.Join(l.dir, st.RunID+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: st.Socket, Net: "unix"})
	if err != nil {
		return err
	}
	if err := runstate.WriteJSON(l.statePath(), st); err != nil {
		ln.Close()
		return err
	}
	l.mu.Lock()
	l.state, l.ln = st, ln
	l.mu.Unlock()
	go l.serve(ln)
	return nil
}

func (l *Live) statePath() string { return runstate.StatePath(l.dir, l.state.RunID) }

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

// Query asks a live run for its status.
func Query(st runstate.State) (Status, error) {
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
func Stop(st runstate.State) (string, int, error) {
	r, err := call(st, "stop", time.Duration(st.StopWaitMS)*time.Millisecond+30*time.Second)
	if err != nil {
		return "", 0, err
	}
	if r.ExitCode == nil {
		return "", 0, fmt.Errorf("run %s ended without an outcome", st.RunID)
	}
	return r.Reason, *r.ExitCode, nil
}

func call(st runstate.State, op string, wait time.Duration) (reply, error) {
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

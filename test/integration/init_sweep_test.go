package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentjail/agentjail/runstate"
)

const liveRuns = "/run/agentjail/runs"

// TestInitSweepsDeadRuns: a run whose supervisor died left a process that
// still carries its marker and a state file; `agentjail init` ends the
// process and removes the state, and says so.
func TestInitSweepsDeadRuns(t *testing.T) {
	jailedAlone(t)
	d := newDeadRun(t, "")
	if err := os.MkdirAll(liveRuns, 0o700); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(liveRuns, d.id+".json")
	if err := os.WriteFile(stateFile, d.stateJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stateFile) })

	p := startInit(t, false, []string{"init", "--", "sh", "-c", "sleep 0.2"})
	p.stdin.Close()
	code, stderr := p.wait(t)
	if code != 0 {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	d.waitKilled(t)
	if fileExists(stateFile) {
		t.Error("the dead run's state file is left")
	}
	if want := fmt.Sprintf("swept run %s (its supervisor died): killed pid %d (sleep 300)", d.id, d.proc.Process.Pid); !strings.Contains(stderr, want) {
		t.Errorf("init's log lacks %q:\n%q", want, stderr)
	}
}

// TestRunSweepsDeadRuns: `agentjail run` ends what a run whose supervisor
// died left (a process carrying its marker, its agent-homes directory with
// copied credentials, its state file) before it starts its own, and says
// so. The run has a private /run/agentjail (a tmpfs in a mount namespace of
// its own) where the dead run's files go: no concurrent agentjail can sweep
// them first, so this run's log must show the kill.
func TestRunSweepsDeadRuns(t *testing.T) {
	jailed(t)
	d := newDeadRun(t, "/run/agentjail")
	id, state, homes := d.id, d.stateJSON, filepath.Join("/run/agentjail", d.id)

	// $1 is agentjail, the rest its arguments (invocation.wrap).
	script := `set -e
mkdir -p /run/agentjail
mount -t tmpfs -o mode=0700 tmpfs /run/agentjail
mkdir -m 0700 /run/agentjail/runs
mkdir -p "$HOMES/credentials"
echo secret > "$HOMES/credentials/token"
printf '%s' "$STATE" > "/run/agentjail/runs/$ID.json"
set +e
"$@"
echo "exit $?"
ls -A /run/agentjail/runs
[ -e "$HOMES" ] && echo "homes left"
true`
	r := invocation{
		env:  []string{"ID=" + id, "HOMES=" + homes, "STATE=" + string(state)},
		wrap: []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"},
	}.run(t, "run", "--", "true")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "exit 0" {
		t.Errorf("the run exited %d; after it its namespace held (want only \"exit 0\"):\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	d.waitKilled(t)
	if want := fmt.Sprintf("agentjail: swept run %s (its supervisor died): killed pid %d (sleep 300)", id, d.proc.Process.Pid); !strings.Contains(r.stderr, want) {
		t.Errorf("the run's stderr lacks %q:\n%s", want, r.stderr)
	}
}

// TestInitInAPidNamespaceLeavesHostRunsAlone: an init that is PID 1 of a
// fresh pid namespace but shares /run/agentjail with the host (a container
// with the host's /run) sees the host's supervisors' pids as nothing; it
// must not take their runs for dead.
func TestInitInAPidNamespaceLeavesHostRunsAlone(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	host := start(t, nil, "run", "--write", ws, "--chdir", ws, "--", "sh", "-c", "touch up; sleep 300")
	waitFile(t, host, filepath.Join(ws, "up"))
	mine := runOf(t, host.cmd.Process.Pid)
	p := startInit(t, true, []string{"init", "--", "sh", "-c", "sleep 0.2"})
	p.stdin.Close()
	if code, stderr := p.wait(t); code != 0 || strings.Contains(stderr, "swept run "+mine.RunID) {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	runs, _ := runstate.Runs(liveRuns, "/proc")
	alive := false
	for _, st := range runs {
		alive = alive || st.RunID == mine.RunID && st.Alive
	}
	if !alive || !fileExists(filepath.Join(liveRuns, mine.RunID+".json")) {
		t.Fatal("the host's live run was swept by an init in another pid namespace")
	}
	if mine.Cgroup != "" && !fileExists(mine.Cgroup) {
		t.Error("the host's live run lost its cgroup")
	}
	host.cmd.Process.Signal(syscall.SIGTERM)
	if code := host.wait(t); code != 128+15 {
		t.Errorf("the host run ended %d after SIGTERM, want 143 (interrupted)", code)
	}
}

// TestInitSweepsPeriodically: with --sweep-every, init sweeps while its
// command runs, not only at its start: a dead run that appears after a
// sweep has already ended another is ended too, init still running. Init
// is PID 1 of a pid and mount namespace of its own, with a private
// /run/agentjail where the dead runs' state files go and its pid namespace
// where their processes live: no other agentjail (concurrent tests, other
// checkouts on this machine) can sweep them first.
func TestInitSweepsPeriodically(t *testing.T) {
	jailed(t)
	p := startInit(t, true, []string{"init", "--sweep-every", "100ms", "--", "sh", "-c",
		"mkdir -p /run/agentjail && mount -t tmpfs -o mode=0700 tmpfs /run/agentjail && echo up; read x; exit 0"})
	p.waitLine(t, "up")
	first := deadRunIn(t, p.pid)
	first.waitKilled(t)
	// The sweep that ended the first had listed the runs before this one's
	// state file was written: only a later sweep can end it.
	second := deadRunIn(t, p.pid)
	second.waitKilled(t)
	// Their state files go too (the sweep removes them after the kill),
	// seen while init, and so its mount namespace, is alive.
	waitFor(t, func() bool { return !fileExists(first.state) && !fileExists(second.state) })
	select {
	case <-p.exited:
		t.Fatal("init ended before the second sweep")
	default:
	}
	p.stdin.Close()
	code, stderr := p.wait(t)
	if code != 0 {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	for _, r := range []deadRun{first, second} {
		if want := "swept run " + r.id + " (its supervisor died): killed pid "; !strings.Contains(stderr, want) {
			t.Errorf("init's log lacks %q:\n%s", want, stderr)
		}
	}
}

// deadRun is what a run whose supervisor died leaves: a process carrying
// its marker and its state file.
type deadRun struct {
	id, state string // state: the state file's path, once written
	stateJSON []byte
	proc      *exec.Cmd
	exited    chan struct{}
}

// newDeadRun leaves a dead run's process in this namespace and returns its
// state (for the caller to place) naming a supervisor that has exited (its
// pid and start time match nothing); with runDir set, the state names a
// agent-homes directory there (not made).
func newDeadRun(t *testing.T, runDir string) deadRun {
	t.Helper()
	r := deadRun{id: "deadrun" + strings.ToLower(token()), exited: make(chan struct{})}
	homes := ""
	if runDir != "" {
		homes = filepath.Join(runDir, r.id)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	ns, _ := os.Readlink("/proc/self/ns/pid")
	r.stateJSON, _ = json.Marshal(runstate.State{RunID: r.id, PID: gone.Process.Pid, PIDStart: 1, PIDNS: ns, AgentHomes: homes})
	r.proc = exec.Command("sleep", "300")
	r.proc.Env = []string{"AGENTJAIL_RUN=" + r.id}
	if err := r.proc.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.proc.Wait(); close(r.exited) }()
	t.Cleanup(func() { r.proc.Process.Kill() })
	return r
}

// deadRunIn leaves a dead run in the namespaces of process pid: its
// process in its pid namespace (entered with nsenter), its state file, which
// names that namespace, in the /run/agentjail it sees.
func deadRunIn(t *testing.T, pid int) deadRun {
	t.Helper()
	r := deadRun{id: "deadrun" + strings.ToLower(token()), exited: make(chan struct{})}
	r.proc = exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--", "sleep", "300")
	r.proc.Env = []string{"PATH=/usr/bin:/bin", "AGENTJAIL_RUN=" + r.id}
	if err := r.proc.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.proc.Wait(); close(r.exited) }()
	t.Cleanup(func() { r.proc.Process.Kill() })
	// The marked process exists before its state file: nsenter forks it.
	waitFor(t, func() bool { return childOf(r.proc.Process.Pid) > 0 })
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The dead supervisor: no pid of that namespace starts at tick 1 but
	// its init, and that is not 4194000.
	state, _ := json.Marshal(runstate.State{RunID: r.id, PID: 4194000, PIDStart: 1, PIDNS: ns})
	dir := filepath.Join("/proc", strconv.Itoa(pid), "root", liveRuns)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r.state = filepath.Join(dir, r.id+".json")
	if err := os.WriteFile(r.state, state, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(r.state) })
	return r
}

// waitKilled waits for the dead run's process to be killed.
func (r deadRun) waitKilled(t *testing.T) {
	t.Helper()
	waitFor(t, func() bool {
		select {
		case <-r.exited:
			return true
		default:
			return false
		}
	})
	// nsenter raises the signal that ended its child, as sleep's own.
	if ws := r.proc.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("run %s's process ended with %v, want killed", r.id, ws)
	}
}

// runOf waits until the live run whose supervisor is pid has published
// its state, and returns it.
func runOf(t *testing.T, pid int) runstate.State {
	t.Helper()
	var mine runstate.State
	waitFor(t, func() bool {
		runs, _ := runstate.Runs(liveRuns, "/proc")
		for _, st := range runs {
			if st.Alive && st.PID == pid {
				mine = st
				return true
			}
		}
		return false
	})
	return mine
}

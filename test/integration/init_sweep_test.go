package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentjail/agentjail/supervise"
)

const liveRuns = "/run/agentjail/runs"

// TestInitSweepsDeadRuns: a run whose supervisor died left a process that
// still carries its marker and a state file; `agentjail init` ends the
// process and removes the state, and says so.
func TestInitSweepsDeadRuns(t *testing.T) {
	jailedAlone(t)
	id := "deadrun" + strings.ToLower(token())
	// The dead supervisor: a process that has exited (its pid and start
	// time no longer match anything).
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	ns, _ := os.Readlink("/proc/self/ns/pid")
	state, _ := json.Marshal(supervise.State{RunID: id, PID: gone.Process.Pid, PIDStart: 1, PIDNS: ns})
	if err := os.MkdirAll(liveRuns, 0o700); err != nil {
		t.Fatal(err)
	}
	stateFile := filepath.Join(liveRuns, id+".json")
	if err := os.WriteFile(stateFile, state, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stateFile) })
	left := exec.Command("sleep", "300")
	left.Env = []string{"AGENTJAIL_RUN=" + id}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { left.Wait(); close(exited) }()
	t.Cleanup(func() { left.Process.Kill() })

	p := startInit(t, false, []string{"init", "--", "sh", "-c", "sleep 0.2"})
	p.stdin.Close()
	code, stderr := p.wait(t)
	if code != 0 {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	waitFor(t, func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	if ws := left.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the dead run's process ended with %v, want killed", ws)
	}
	if fileExists(stateFile) {
		t.Error("the dead run's state file is left")
	}
	if want := fmt.Sprintf("swept run %s (its supervisor died): killed pid %d (sleep 300)", id, left.Process.Pid); !strings.Contains(stderr, want) {
		t.Errorf("init's log lacks %q:\n%q", want, stderr)
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
	var mine supervise.State
	waitFor(t, func() bool {
		runs, _ := supervise.Runs(liveRuns, "/proc")
		for _, st := range runs {
			if st.Alive && st.PID == host.cmd.Process.Pid {
				mine = st
				return true
			}
		}
		return false
	})
	p := startInit(t, true, []string{"init", "--", "sh", "-c", "sleep 0.2"})
	p.stdin.Close()
	if code, stderr := p.wait(t); code != 0 || strings.Contains(stderr, "swept run "+mine.RunID) {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	runs, _ := supervise.Runs(liveRuns, "/proc")
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

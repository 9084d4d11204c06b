package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentjail/agentjail/procs"
)

func TestRunsTellsDeadSupervisorsAndSweepDeadCleansUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A supervisor that died: pid 1's start time is not this one.
	dead := State{RunID: "deadrun", PID: 1, PIDStart: 999999999, Socket: filepath.Join(dir, "deadrun.sock"), Cgroup: filepath.Join(dir, "no-such-cgroup"),
		AgentHomes: filepath.Join(t.TempDir(), "deadrun")}
	os.MkdirAll(filepath.Join(dead.AgentHomes, "claude"), 0o700)
	os.WriteFile(filepath.Join(dead.AgentHomes, "claude", ".credentials.json"), []byte("{}"), 0o600)
	if err := WriteJSON(filepath.Join(dir, "deadrun.json"), dead); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dead.Socket, nil, 0o600)
	for _, id := range []string{"liverun1", "liverun2"} {
		publish(t, dir, id)
	}
	runs, err := Runs(dir, "/proc")
	if err != nil || len(runs) != 3 {
		t.Fatalf("Runs: %v %v", runs, err)
	}
	for _, st := range runs {
		if st.Alive != (st.RunID != "deadrun") {
			t.Errorf("%s alive=%v", st.RunID, st.Alive)
		}
	}
	if _, err := Find(dir, "/proc", "liverun"); !errors.Is(err, ErrAmbiguousRun) {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if _, err := Find(dir, "/proc", "deadrun"); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("a dead run is not live: %v", err)
	}
	killed, err := SweepDead(dir, "/proc")
	if err != nil || len(killed) != 0 {
		t.Errorf("SweepDead: %v %v", killed, err)
	}
	for _, f := range []string{filepath.Join(dir, "deadrun.json"), filepath.Join(dir, "deadrun.sock"), dead.AgentHomes} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left", f)
		}
	}
	if runs, _ := Runs(dir, "/proc"); len(runs) != 2 {
		t.Errorf("SweepDead touched live runs: %v", runs)
	}
}

// TestSweepDeadLeavesOtherPidNamespaces: a state file written by a
// supervisor in another pid namespace (a container sharing /run/agentjail
// with the host, or the host seen from a container) names a pid that means
// nothing here; the sweep must not take that run for dead.
func TestSweepDeadLeavesOtherPidNamespaces(t *testing.T) {
	t.Parallel()
	here := PIDNamespace("/proc", "self")
	dir := t.TempDir()
	homes := filepath.Join(t.TempDir(), "elsewhere")
	os.MkdirAll(homes, 0o700)
	other := State{RunID: "elsewhere", PID: 1, PIDStart: 999999999, PIDNS: "pid:[1]", AgentHomes: homes}
	if other.PIDNS == here {
		other.PIDNS = "pid:[2]"
	}
	if err := WriteJSON(filepath.Join(dir, "elsewhere.json"), other); err != nil {
		t.Fatal(err)
	}
	runs, err := Runs(dir, "/proc")
	if err != nil || len(runs) != 1 || !runs[0].Foreign || runs[0].Alive {
		t.Fatalf("Runs: %+v %v", runs, err)
	}
	if _, err := SweepDead(dir, "/proc"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "elsewhere.json"), homes} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the sweep removed %s of a run in another pid namespace", f)
		}
	}
	// A run of this namespace records it.
	publish(t, dir, "mine")
	runs, _ = Runs(dir, "/proc")
	for _, st := range runs {
		if st.RunID == "mine" && (st.PIDNS != PIDNamespace("/proc", "self") || st.Foreign || !st.Alive) {
			t.Errorf("own run: %+v", st)
		}
	}
}

// TestRunsWithoutPID1sNamespace: where /proc/1/ns/pid is not readable (a
// root without CAP_SYS_PTRACE over PID 1, as in many containers) the
// namespace is the caller's own; a run of another namespace must still be
// foreign, never dead (it was taken for dead, and its jail killed by any
// run's sweep, before).
func TestRunsWithoutPID1sNamespace(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "self", "ns"), 0o755)
	if err := os.Symlink("pid:[111]", filepath.Join(proc, "self", "ns", "pid")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, st := range []State{
		{RunID: "other", PID: 3, PIDStart: 42, PIDNS: "pid:[222]"},
		{RunID: "mine", PID: 3, PIDStart: 42, PIDNS: "pid:[111]"},
	} {
		if err := WriteJSON(filepath.Join(dir, st.RunID+".json"), st); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := Runs(dir, proc)
	if err != nil || len(runs) != 2 {
		t.Fatalf("Runs: %+v %v", runs, err)
	}
	for _, st := range runs {
		if foreign := st.RunID == "other"; st.Foreign != foreign || st.Alive {
			t.Errorf("%s: foreign %v alive %v", st.RunID, st.Foreign, st.Alive)
		}
	}
}

// TestSweepDeadKeepsStateWhileHomesStay: a dead run whose agent-homes directory
// cannot be removed keeps its state file, which is what leads the next
// sweep (and the operator) to the copied credentials. The homes here are
// a file of /proc, which no one may unlink.
func TestSweepDeadKeepsStateWhileHomesStay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := State{RunID: "stuck", PID: 1, PIDStart: 999999999, PIDNS: PIDNamespace("/proc", "self"), AgentHomes: "/proc/self/comm"}
	if err := WriteJSON(filepath.Join(dir, "stuck.json"), st); err != nil {
		t.Fatal(err)
	}
	if _, err := SweepDead(dir, "/proc"); err == nil {
		t.Error("SweepDead reported no error for homes it could not remove")
	}
	if _, err := os.Stat(filepath.Join(dir, "stuck.json")); err != nil {
		t.Errorf("the state file went while its homes stay: %v", err)
	}
}

// TestStateKeysOfEarlierBuilds: a state file of an earlier build, which
// holds the homes under "stage", leads the sweep to them; a state file
// written now holds them under "homes" and "stage" both, for an
// `agentjail init` of an earlier build.
func TestStateKeysOfEarlierBuilds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	homes := filepath.Join(t.TempDir(), "old")
	os.MkdirAll(filepath.Join(homes, "credentials"), 0o700)
	old := fmt.Sprintf(`{"run_id":"old","pid":1,"pid_start":999999999,"pid_ns":%q,"stage":%q}`, PIDNamespace("/proc", "self"), homes)
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	runs, err := Runs(dir, "/proc")
	if err != nil || len(runs) != 1 || runs[0].AgentHomes != homes {
		t.Fatalf("Runs: %+v %v; want the homes %s", runs, err, homes)
	}
	if _, err := SweepDead(dir, "/proc"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(homes); !os.IsNotExist(err) {
		t.Errorf("the sweep left the homes of an earlier build's run: %v", err)
	}

	data, err := json.Marshal(State{RunID: "new", AgentHomes: "/run/agentjail/new"})
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil || keys["homes"] != "/run/agentjail/new" || keys["stage"] != "/run/agentjail/new" {
		t.Errorf("a state file holds %s; want the homes under homes and stage", data)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil || back.RunID != "new" || back.AgentHomes != "/run/agentjail/new" {
		t.Errorf("read back %+v, %v", back, err)
	}
}

// publish writes the state file of a live run whose supervisor is this
// process, as live.Live.Open does.
func publish(t *testing.T, dir, id string) {
	t.Helper()
	st, err := procs.ReadStat("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	state := State{RunID: id, PID: os.Getpid(), PIDStart: st.Start, PIDNS: PIDNamespace("/proc", "self")}
	if err := WriteJSON(StatePath(dir, id), state); err != nil {
		t.Fatal(err)
	}
}

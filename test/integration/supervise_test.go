package integration

// Issue 3's "what it must show", one test per point, in its order. Every
// test that runs the jail reads its --record with readRecord, which checks
// that the record is valid JSON with the documented fields in every case.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/runstate"
)

func TestWallTimeoutKillsChildIgnoringTERMAfterGrace(t *testing.T) {
	jailed(t)
	rp := recordPath(t)
	r := aj(t, "run", "--timeout", "1", "--grace", "1", "--record", rp, "--",
		"sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	wantCode(t, r, 124)
	rec := readRecord(t, rp, 124)
	if rec.Reason != "wall_timeout" || !slices.Equal(rec.sent(), []string{"SIGTERM", "SIGCONT", "SIGKILL"}) {
		t.Errorf("reason %s, signals %v", rec.Reason, rec.sent())
	}
	// The SIGKILL came after the grace, not before.
	term, _ := time.Parse(recordTime, rec.SignalsSent[0].At)
	kill, _ := time.Parse(recordTime, rec.SignalsSent[2].At)
	if kill.Sub(term) < time.Second {
		t.Errorf("SIGKILL %v after SIGTERM, before the 1s grace", kill.Sub(term))
	}
	if rec.SignalsSent[0].Target != "group" || rec.AgentExitCode == nil || *rec.AgentExitCode != 137 || !rec.AgentSignalAmbiguous {
		t.Errorf("target %s, agent exit %v, ambiguous %v", rec.SignalsSent[0].Target, rec.AgentExitCode, rec.AgentSignalAmbiguous)
	}
}

func TestTrappedTERMExitsWithinGrace(t *testing.T) {
	jailed(t)
	rp := recordPath(t)
	r := aj(t, "run", "--timeout", "1", "--grace", "50", "--record", rp, "--",
		"sh", "-c", `trap "echo got-term; exit 3" TERM; while :; do sleep 0.1; done`)
	wantCode(t, r, 124)
	rec := readRecord(t, rp, 124)
	if r.stdout != "got-term\n" || rec.Reason != "wall_timeout" || slices.Contains(rec.sent(), "SIGKILL") {
		t.Errorf("stdout %q, reason %s, signals %v", r.stdout, rec.Reason, rec.sent())
	}
	if rec.AgentExitCode == nil || *rec.AgentExitCode != 3 || rec.Excerpt.Stdout.Head != "got-term\n" {
		t.Errorf("agent exit %v, excerpt %+v", rec.AgentExitCode, rec.Excerpt.Stdout)
	}
}

func TestStoppedChildStillEnds(t *testing.T) {
	jailed(t)
	rp := recordPath(t)
	// Stopped, and deaf to SIGTERM once continued: only SIGKILL ends it.
	r := aj(t, "run", "--timeout", "1", "--grace", "1", "--record", rp, "--", "sh", "-c", `trap "" TERM; kill -STOP $$; sleep 1000`)
	wantCode(t, r, 124)
	if rec := readRecord(t, rp, 124); rec.Reason != "wall_timeout" || !slices.Contains(rec.sent(), "SIGKILL") {
		t.Errorf("reason %s, signals %v", rec.Reason, rec.sent())
	}
}

func TestSilentChildTripsIdleTimeout(t *testing.T) {
	jailed(t)
	rp := recordPath(t)
	r := aj(t, "run", "--idle-timeout", "1", "--grace", "1", "--record", rp, "--", "sh", "-c", "echo one line; sleep 1000")
	wantCode(t, r, 124)
	rec := readRecord(t, rp, 124)
	if rec.Reason != "idle_timeout" || rec.Limits.IdleMS != 1000 || rec.Bytes.Stdout != 9 {
		t.Errorf("reason %s, idle_ms %d, bytes %d", rec.Reason, rec.Limits.IdleMS, rec.Bytes.Stdout)
	}
}

func TestOutputKeepsIdleTimedRunAlive(t *testing.T) {
	jailed(t)
	// Each writes a byte every 0.2 s for 3 s, under a 2 s idle timeout.
	const loop = `i=0; while [ $i -lt 15 ]; do printf x%s; sleep 0.2; i=$((i+1)); done`
	for _, c := range []struct{ name, script string }{
		{"stdout", fmt.Sprintf(loop, "")},
		{"stderr", fmt.Sprintf(loop, " >&2")},
		{"grandchild", fmt.Sprintf(`sh -c 'sh -c "$1" & wait' child '%s' & wait`, fmt.Sprintf(loop, ""))},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			r := aj(t, "run", "--idle-timeout", "2", "--record", rp, "--", "sh", "-c", c.script)
			wantCode(t, r, 0)
			rec := readRecord(t, rp, 0)
			if rec.Reason != "exit" || rec.Bytes.Stdout+rec.Bytes.Stderr != 15 {
				t.Errorf("reason %s, bytes %+v", rec.Reason, rec.Bytes)
			}
		})
	}
}

func TestDaemonizedGrandchildDoesNotOutliveRun(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	tok := token()
	rp := recordPath(t)
	// setsid, a double fork and an empty environment (no marker): the
	// daemon escapes the process group and the sweep; the pid namespace
	// and the cgroup still end it.
	script := fmt.Sprintf(`setsid sh -c '(env -i /bin/sh -c "touch up; exec sleep %s" &) &'
		i=0; while [ ! -e up ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; test -e up`, tok)
	r := aj(t, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c", script)
	wantCode(t, r, 0)
	readRecord(t, rp, 0)
	// No polling: agentjail returns only once the jail is gone.
	if left := procsWith("sleep " + tok); len(left) > 0 {
		t.Errorf("the daemon outlived the run: %v", left)
	}
}

func TestGrandchildHoldingStdoutDoesNotHang(t *testing.T) {
	jailed(t)
	for _, c := range []struct{ name, script string }{
		{"background", "sleep 1000 & echo done"},
		{"new session", "setsid sleep 1000 & echo done"},
		{"stderr too", "(sleep 1000 >&2 &) ; echo done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			r := aj(t, "run", "--record", rp, "--", "sh", "-c", c.script) // aj fails after a minute
			wantCode(t, r, 0)
			if rec := readRecord(t, rp, 0); r.stdout != "done\n" || rec.Reason != "exit" || len(rec.Warnings) > 0 {
				t.Errorf("stdout %q, reason %s, warnings %v", r.stdout, rec.Reason, rec.Warnings)
			}
		})
	}
}

func TestSweepSparesDecoysAndKillsEscapees(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`echo "$AGENTJAIL_RUN" > id.tmp && mv id.tmp id; while [ ! -e go ]; do sleep 0.05; done`)
	waitFile(t, b, filepath.Join(ws, "id"))
	data, _ := os.ReadFile(filepath.Join(ws, "id"))
	id := strings.TrimSpace(string(data))
	// Host processes, outside the jail: only the one with the exact marker
	// is the run's (an escapee, as if the agent had one started for it).
	tok := token()
	spawn := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", tok)
		c.Env = env
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	decoys := []*exec.Cmd{
		spawn("AGENTJAIL_RUN=" + id + "x"),
		spawn("AGENTJAIL_RUN=other" + id),
		spawn("XAGENTJAIL_RUN=" + id),
		spawn("NOTE=AGENTJAIL_RUN=" + id),
	}
	escapee := spawn("PATH=/bin", "AGENTJAIL_RUN="+id)
	escaped := make(chan error, 1)
	go func() { escaped <- escapee.Wait() }()
	write(t, ws, map[string]string{"go": ""})
	wantCode(t, result{code: b.wait(t)}, 0)
	rec := readRecord(t, rp, 0)
	for _, d := range decoys {
		if err := d.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("decoy %v was killed: %v", d.Env, err)
		}
	}
	select {
	case err := <-escaped:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("escapee ended with %v, want SIGKILL", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the escapee carrying the run's marker survived the sweep")
	}
	if len(rec.Orphans) != 1 || rec.Orphans[0].PID != escapee.Process.Pid || rec.Orphans[0].Cmd != "sleep "+tok {
		t.Errorf("orphans %+v, want the escapee %d", rec.Orphans, escapee.Process.Pid)
	}
}

// TestSIGKILLOfAgentjailLeavesNoJailedProcess runs alone: every `agentjail
// run` sweeps dead runs at its start, so a concurrent test's run could take
// the killed run's leftovers (and kill its processes) before this test looks.
func TestSIGKILLOfAgentjailLeavesNoJailedProcess(t *testing.T) {
	jailedAlone(t)
	ws := workspace(t)
	tok := token()
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--", "sh", "-c",
		fmt.Sprintf(`setsid sh -c 'env -i sleep %s' & sleep %s & touch up; wait`, tok, tok))
	waitFile(t, b, filepath.Join(ws, "up"))
	waitFor(t, func() bool { return len(procsWith("sleep "+tok, b.cmd.Process.Pid)) >= 2 })
	b.cmd.Process.Signal(syscall.SIGKILL)
	if code := b.wait(t); code != 128+9 {
		t.Fatalf("agentjail exited %d, want death by SIGKILL", code)
	}
	// bwrap dies with its parent (--die-with-parent), the sandbox with
	// bwrap, and with the sandbox the whole pid namespace.
	waitFor(t, func() bool { return len(procsWith(tok)) == 0 })

	// What the dead supervisor left, its state file and empty cgroup, is
	// what `agentjail init` and the next run sweep.
	runs, _ := runstate.Runs("/run/agentjail/runs", "/proc")
	var dead []runstate.State
	for _, st := range runs {
		if !st.Alive {
			dead = append(dead, st)
		}
	}
	if len(dead) == 0 {
		t.Fatal("no state file of the killed run")
	}
	if _, err := runstate.SweepDead("/run/agentjail/runs", "/proc"); err != nil {
		t.Errorf("SweepDead: %v", err)
	}
	hadHomes := false
	for _, st := range dead {
		if fileExists(filepath.Join("/run/agentjail/runs", st.RunID+".json")) || st.Cgroup != "" && fileExists(st.Cgroup) {
			t.Errorf("SweepDead left %s's state or cgroup %s", st.RunID, st.Cgroup)
		}
		// Where the host keeps pids and memory on cgroup v1 (this one).
		if st.PID == b.cmd.Process.Pid && fileExists("/sys/fs/cgroup/pids/cgroup.procs") && len(st.CgroupsV1) == 0 {
			t.Errorf("%s's state names no cgroup v1 directory, on a host with a cgroup v1 pids hierarchy", st.RunID)
		}
		for _, d := range st.CgroupsV1 {
			if fileExists(d) {
				t.Errorf("SweepDead left %s's cgroup %s", st.RunID, d)
			}
		}
		// tier1's private Claude Code directory: a tmpfs in the run's
		// agent-homes directory.
		hadHomes = hadHomes || st.AgentHomes != ""
		if st.AgentHomes != "" && fileExists(st.AgentHomes) {
			t.Errorf("SweepDead left %s's agent-homes directory %s", st.RunID, st.AgentHomes)
		}
	}
	if !hadHomes {
		t.Errorf("no dead run had an agent-homes directory to sweep")
	}
}

func TestTwentyConcurrentRunsAreNotKilledEarly(t *testing.T) {
	jailed(t)
	shared := workspace(t)
	// Each run waits until all twenty are up, then ends at its own time:
	// the early ones sweep while the others still run.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			rp := recordPath(t)
			script := fmt.Sprintf(`touch %d; n=0
				while [ "$(ls | wc -l)" -lt 20 ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done
				sleep 0.%02d; echo ok`, i, i*4)
			r := aj(t, "run", "--write", shared, "--chdir", shared, "--record", rp, "--", "sh", "-c", script)
			if r.code != 0 || r.stdout != "ok\n" {
				t.Errorf("run %d: exit %d, stdout %q, stderr %s", i, r.code, r.stdout, r.stderr)
				return
			}
			if rec := readRecord(t, rp, 0); rec.Reason != "exit" || len(rec.Orphans) > 0 {
				t.Errorf("run %d: reason %s, orphans %v", i, rec.Reason, rec.Orphans)
			}
		})
	}
	wg.Wait()
}

func TestSIGTERMToAgentjailGivesGraceAndRecordsInterrupted(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`trap 'echo bye; exit 0' TERM; touch ready; while :; do sleep 0.1; done`)
	waitFile(t, b, filepath.Join(ws, "ready"))
	b.cmd.Process.Signal(syscall.SIGTERM)
	code := b.wait(t)
	wantCode(t, result{code: code, stderr: b.stderr.String()}, 128+15)
	rec := readRecord(t, rp, 143)
	if rec.Reason != "interrupted" || rec.Signal == nil || *rec.Signal != "SIGTERM" || b.stdout.String() != "bye\n" {
		t.Errorf("reason %s, signal %v, stdout %q", rec.Reason, rec.Signal, b.stdout.String())
	}
	if rec.AgentExitCode == nil || *rec.AgentExitCode != 0 || slices.Contains(rec.sent(), "SIGKILL") {
		t.Errorf("the agent did not leave in its grace: exit %v, signals %v", rec.AgentExitCode, rec.sent())
	}
	if len(rec.SignalsReceived) != 1 || rec.SignalsReceived[0].Signal != "SIGTERM" {
		t.Errorf("signals received %+v", rec.SignalsReceived)
	}
}

// TestEveryProcessGetsTheGrace: a timeout, `agentjail stop` and SIGTERM
// to agentjail reach, within the grace, a process of the jail in a session
// of its own (setsid), outside the jail's process group, that traps
// SIGTERM: the run ends without SIGKILL.
func TestEveryProcessGetsTheGrace(t *testing.T) {
	jailed(t)
	script := `echo "$AGENTJAIL_RUN" > id.tmp && mv id.tmp id
setsid sh -c 'trap "touch got-term; exit 0" TERM; touch up; while :; do sleep 0.1; done' &
trap 'wait; exit 0' TERM; wait`
	for _, c := range []struct {
		name string
		args []string
		end  func(t *testing.T, b *background, ws string)
		code int
	}{
		{"timeout", []string{"--timeout", "5"}, nil, 124},
		{"agentjail stop", nil, func(t *testing.T, b *background, ws string) {
			id, _ := os.ReadFile(filepath.Join(ws, "id"))
			wantCode(t, aj(t, "stop", strings.TrimSpace(string(id))), 0)
		}, 124},
		{"SIGTERM", nil, func(t *testing.T, b *background, ws string) { b.cmd.Process.Signal(syscall.SIGTERM) }, 128 + 15},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := workspace(t)
			rp := recordPath(t)
			args := append([]string{"run", "--grace", "30", "--write", ws, "--chdir", ws, "--record", rp}, c.args...)
			b := start(t, nil, append(args, "--", "sh", "-c", script)...)
			waitFile(t, b, filepath.Join(ws, "up"))
			waitFile(t, b, filepath.Join(ws, "id"))
			if c.end != nil {
				c.end(t, b, ws)
			}
			code := b.wait(t)
			rec := readRecord(t, rp, code)
			var targets []string
			for _, s := range rec.SignalsSent {
				targets = append(targets, s.Signal+">"+s.Target)
			}
			if code != c.code || !fileExists(filepath.Join(ws, "got-term")) || !slices.Contains(targets, "SIGTERM>others") || slices.Contains(rec.sent(), "SIGKILL") {
				t.Errorf("exit %d, want %d; got-term written: %v; signals sent %v; stderr:\n%s", code, c.code, fileExists(filepath.Join(ws, "got-term")), targets, b.stderr.String())
			}
		})
	}
}

// TestCtrlCReachesTheAgentThroughAgentjail: a terminal sends ^C to its
// foreground process group, agentjail's; bwrap must not be in it.
func TestCtrlCReachesTheAgentThroughAgentjail(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := startGroup(t, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`trap 'echo got-int; exit 0' INT; touch ready; while :; do sleep 0.1; done`)
	waitFile(t, b, filepath.Join(ws, "ready"))
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
	code := b.wait(t)
	rec := readRecord(t, rp, code)
	if code != 130 || rec.Reason != "interrupted" || b.stdout.String() != "got-int\n" || rec.AgentExitCode == nil || *rec.AgentExitCode != 0 {
		t.Errorf("exit %d, reason %s, stdout %q, agent exit %v", code, rec.Reason, b.stdout.String(), rec.AgentExitCode)
	}
}

func TestSecondSIGINTEscalatesAtOnce(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--grace", "50", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`trap 'touch got-int' INT; trap '' TERM; touch ready; while :; do sleep 0.1; done`)
	waitFile(t, b, filepath.Join(ws, "ready"))
	b.cmd.Process.Signal(syscall.SIGINT)
	waitFile(t, b, filepath.Join(ws, "got-int")) // forwarded; the agent lives on
	b.cmd.Process.Signal(syscall.SIGINT)
	code := b.wait(t)
	rec := readRecord(t, rp, code)
	if code != 130 || rec.Reason != "interrupted" || !slices.Equal(rec.sent(), []string{"SIGINT", "SIGCONT", "SIGKILL"}) {
		t.Errorf("exit %d, reason %s, signals %v", code, rec.Reason, rec.sent())
	}
}

func Test50MBOfOutputArrivesByteExact(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	// 50 MB without a newline, with NULs and invalid UTF-8.
	data := make([]byte, 50_000_000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		if data[i] = byte(rng.Uint32()); data[i] == '\n' {
			data[i] = 0
		}
	}
	src := filepath.Join(dir, "blob")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	for _, c := range []struct{ name, redirect string }{{"stdout", ""}, {"stderr", " >&2"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp, log := recordPath(t), filepath.Join(t.TempDir(), "log")
			r := aj(t, "run", "--log", log, "--record", rp, "--", "sh", "-c", "cat "+src+c.redirect)
			wantCode(t, r, 0)
			rec := readRecord(t, rp, 0)
			got, other := r.stdout, r.stderr // a run that goes well says nothing of its own
			if c.name == "stderr" {
				got, other = other, got
			}
			if sha256.Sum256([]byte(got)) != want || other != "" {
				t.Errorf("%s: %d bytes arrived, not the 50 MB written (other stream %d bytes)", c.name, len(got), len(other))
			}
			logged, _ := os.ReadFile(log)
			if sha256.Sum256(logged) != want {
				t.Errorf("the log holds %d bytes, not the 50 MB written", len(logged))
			}
			n, ex := rec.Bytes.Stdout, rec.Excerpt.Stdout
			if c.name == "stderr" {
				n, ex = rec.Bytes.Stderr, rec.Excerpt.Stderr
			}
			// The excerpt's ends give up a secret's length at the cut
			// (record.RedactExcerpt): a few bytes more are omitted.
			if base := int64(len(data)) - rec.Limits.OutputHead - rec.Limits.OutputTail; n != int64(len(data)) || ex.OmittedBytes < base || ex.OmittedBytes > base+8192 {
				t.Errorf("bytes %d, omitted %d, want %d and a few more", n, ex.OmittedBytes, base)
			}
		})
	}
}

func TestPsShowsRunningJailAndStopEndsIt(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`echo "$AGENTJAIL_RUN" > id.tmp && mv id.tmp id; echo working; sleep 1000`)
	waitFile(t, b, filepath.Join(ws, "id"))
	data, _ := os.ReadFile(filepath.Join(ws, "id"))
	id := strings.TrimSpace(string(data))

	var st map[string]any
	waitFor(t, func() bool {
		r := aj(t, "ps", "--json")
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var s map[string]any
			if json.Unmarshal([]byte(line), &s) == nil && s["run_id"] == id {
				st = s
			}
		}
		return st != nil && st["bytes"].(map[string]any)["stdout"] == 8.0
	})
	for _, k := range []string{"profile", "pid", "started_at", "idle_ms"} {
		if _, ok := st[k]; !ok {
			t.Errorf("ps --json lacks %s: %v", k, st)
		}
	}
	if st["pid"] != float64(b.cmd.Process.Pid) || st["profile"] != "tier1" {
		t.Errorf("ps --json: %v", st)
	}
	if r := aj(t, "ps"); !strings.Contains(r.stdout, id) || !strings.HasPrefix(r.stdout, "RUN ID") {
		t.Errorf("ps: %q", r.stdout)
	}

	r := aj(t, "stop", id)
	wantCode(t, r, 0)
	if r.stdout != id+": stopped (exit 124)\n" {
		t.Errorf("stop said %q", r.stdout)
	}
	code := b.wait(t)
	rec := readRecord(t, rp, 124)
	if code != 124 || rec.Reason != "stopped" || rec.sent()[0] != "SIGTERM" {
		t.Errorf("exit %d, reason %s, signals %v", code, rec.Reason, rec.sent())
	}
	if r := aj(t, "ps", "--json"); strings.Contains(r.stdout, id) {
		t.Errorf("ps still lists the stopped run: %s", r.stdout)
	}

	r = aj(t, "stop", id)
	wantCode(t, r, 125)
	if !strings.Contains(r.stderr, "no live run with this id") {
		t.Errorf("stop of an ended run: %q", r.stderr)
	}
}

// TestStopJSON: `agentjail stop --json ID` prints one line, a JSON object
// whose run_id, reason and exit_code are the stopped run's record's (the
// full id for a prefix of it); a stop that fails prints nothing on stdout
// and exits 125 (docs/usage.md, Machine-readable output).
func TestStopJSON(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`echo "$AGENTJAIL_RUN" > id.tmp && mv id.tmp id; sleep 1000`)
	waitFile(t, b, filepath.Join(ws, "id"))
	data, _ := os.ReadFile(filepath.Join(ws, "id"))
	id := strings.TrimSpace(string(data))

	r := aj(t, "stop", "--json", id[:12])
	wantCode(t, r, 0)
	code := b.wait(t)
	rec := readRecord(t, rp, code)
	var got map[string]any
	if strings.Count(r.stdout, "\n") != 1 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Fatalf("stop --json printed %q, want one line of JSON", r.stdout)
	}
	if want := map[string]any{"run_id": rec.RunID, "reason": rec.Reason, "exit_code": float64(rec.ExitCode)}; rec.RunID != id || rec.Reason != "stopped" || code != 124 ||
		got["run_id"] != want["run_id"] || got["reason"] != want["reason"] || got["exit_code"] != want["exit_code"] {
		t.Errorf("stop --json printed %v; the run exited %d, its record says %v", got, code, want)
	}

	r = aj(t, "stop", "--json", id)
	wantCode(t, r, 125)
	if r.stdout != "" || !strings.Contains(r.stderr, "no live run with this id") {
		t.Errorf("stop --json of an ended run: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestRecordInEveryOutcome(t *testing.T) {
	jailed(t)
	const secret = "sk-ant-record-secret-value"
	dir := visibleDir(t)
	write(t, dir, map[string]string{
		"bad.yaml": "extends: tier1\nlimits:\n  idle: -5\n",
		// bwrap itself fails to set the jail up (a bind source missing).
		"failing-bwrap": "#!/bin/sh\n[ \"$1\" = --version ] && exec bwrap --version\nexec bwrap --ro-bind /nonexistent/agentjail-src /mnt \"$@\"\n",
	})
	os.Chmod(filepath.Join(dir, "failing-bwrap"), 0o755)
	for _, c := range []struct {
		name   string
		bwrap  string
		args   []string
		code   int
		reason string
	}{
		// The host's network: a proxy jail gets a placeholder, not the key.
		{"exit", "", []string{"--net", "host", "--", "sh", "-c", "echo $ANTHROPIC_API_KEY; exit 7"}, 7, "exit"},
		{"signal", "", []string{"--", "sh", "-c", "kill -SEGV $$"}, 139, "signal"},
		{"exec failed", "", []string{"--", "no-such-command-anywhere"}, 127, "exec_failed"},
		{"bad profile", "", []string{"--profile", filepath.Join(dir, "bad.yaml"), "--", "true"}, 125, "setup_failed"},
		{"bwrap fails", filepath.Join(dir, "failing-bwrap"), []string{"--", "true"}, 125, "setup_failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			env := []string{"ANTHROPIC_API_KEY=" + secret}
			if c.bwrap != "" {
				env = append(env, "AGENTJAIL_BWRAP="+c.bwrap)
			}
			r := invocation{env: env}.run(t, append([]string{"run", "--record", rp}, c.args...)...)
			wantCode(t, r, c.code)
			rec := readRecord(t, rp, c.code)
			if rec.Reason != c.reason {
				t.Errorf("reason %s, want %s (stderr %s)", rec.Reason, c.reason, r.stderr)
			}
			if data, _ := os.ReadFile(rp); bytes.Contains(data, []byte(secret)) {
				t.Errorf("the record shows an environment value:\n%s", data)
			}
			switch c.reason {
			case "exit":
				if rec.Excerpt.Stdout.Head != "[redacted]\n" || rec.Bytes.Stdout != int64(len(secret)+1) {
					t.Errorf("excerpt %+v bytes %+v", rec.Excerpt.Stdout, rec.Bytes)
				}
			case "signal":
				if rec.Signal == nil || *rec.Signal != "SIGSEGV" || !rec.AgentSignalAmbiguous {
					t.Errorf("signal %v ambiguous %v", rec.Signal, rec.AgentSignalAmbiguous)
				}
			case "exec_failed":
				if rec.ExecFailure == nil || rec.ExecFailure.Path != "no-such-command-anywhere" {
					t.Errorf("exec_failure %+v", rec.ExecFailure)
				}
			case "setup_failed":
				if rec.Error == "" || !strings.Contains(r.stderr, "agentjail: ") {
					t.Errorf("error %q, stderr %q", rec.Error, r.stderr)
				}
			}
		})
	}
}

// TestRecordRedactsSecretsCutByTheExcerpt: with a 2000-byte head and tail,
// a credential the broker holds (the jail has a placeholder) that the
// omitted bytes cut would show its start at the end of the head and its
// end at the start of the tail. Masking only what matched it let a later
// run that read the record test its guesses, byte by byte (a tester's
// finding): each end now gives up 512 bytes at the cut (the credential's
// length, rounded up, which so says nothing of it), whatever they hold,
// for a right guess and a wrong one alike. A
// value of the jail's own environment costs no bytes, and one shorter
// than 6 bytes is no secret.
func TestRecordRedactsSecretsCutByTheExcerpt(t *testing.T) {
	jailed(t)
	const secret = "sk-ant-cut-0123456789abcdef"
	dir := visibleDir(t)
	write(t, dir, map[string]string{"small.yaml": "extends: tier1\nlimits:\n  output:\n    head: 2000\n    tail: 2000\n"})
	for _, guess := range []string{secret, "sk-ant-cut-X123456789abcdeX"} {
		rp := recordPath(t)
		// Head: "abcde" + 1989 x + the guess's first 6 bytes; tail: its
		// last 14 bytes + 1986 z.
		r := invocation{env: []string{"ANTHROPIC_API_KEY=" + secret}}.run(t, "run", "--profile", filepath.Join(dir, "small.yaml"), "--record", rp,
			"--env", "SHORTV=abcde", "--",
			"sh", "-c", `printf '%s%s%s-the-middle-of-it-%s%s' "$SHORTV" "$(printf 'x%.0s' $(seq 1989))" `+guess+` `+guess+` "$(printf 'z%.0s' $(seq 1986))"`)
		wantCode(t, r, 0)
		rec := readRecord(t, rp, 0)
		ex := rec.Excerpt.Stdout
		if !strings.HasPrefix(ex.Head, "abcdexxxx") || strings.Trim(ex.Head[5:], "x") != "" || strings.Trim(ex.Tail, "z") != "" || ex.Tail == "" ||
			int64(len(ex.Head)+len(ex.Tail))+ex.OmittedBytes != rec.Bytes.Stdout {
			t.Errorf("guess %s: excerpt %+v of %d bytes, want x and z only, their lengths adding up", guess, ex, rec.Bytes.Stdout)
		}
		if len(ex.Head) != 2000-512 || len(ex.Tail) != 2000-512 {
			t.Errorf("guess %s: head %d and tail %d bytes, want 512 given up by each", guess, len(ex.Head), len(ex.Tail))
		}
		if shown := ex.Head + ex.Tail; strings.Contains(shown, secret[:6]) || strings.Contains(shown, secret[13:]) {
			t.Errorf("the excerpt shows part of the credential: %+v", ex)
		}
	}
}

// TestRunIsASubreaper: `agentjail run` is a child subreaper, so an orphan
// of the jailed command that escapes the jail's pid namespace (only a
// degraded jail shares agentjail's) is re-parented to the supervisor and
// reaped, not handed to PID 1 or left a zombie. The masked /proc here is
// set up by a shell that stays PID 1, so an orphan handed past agentjail
// would show PPid 1.
func TestRunIsASubreaper(t *testing.T) {
	jailed(t)
	weak := weakProfile(t)
	wrap := []string{"unshare", "-mpf", "--mount-proc", "sh", "-c", `mount --bind /dev/null /proc/timer_list && "$@"`, "sh"}
	ppid := `$(awk '/^PPid:/ {print $2}' /proc/$1/status)`
	script := `ppid() { echo ` + ppid + `; }
o=$(sh -c 'sleep 300 >/dev/null 2>&1 & echo $!')
p=$$
while [ "$p" -gt 1 ] && [ "$(cat /proc/$p/comm)" != agentjail ]; do p=$(ppid $p); done
echo "supervisor=$p orphan-ppid=$(ppid $o)"
kill $o
i=0
while [ -e /proc/$o ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
if [ -e /proc/$o ]; then echo "left: $(cat /proc/$o/stat)"; else echo reaped; fi`
	r := invocation{wrap: wrap}.run(t, "run", "--profile", weak, "--", "sh", "-c", script)
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "agentjail: degraded: jail: no fresh /proc and no pid namespace") {
		t.Fatalf("the jail did not share agentjail's pid namespace:\n%s", r.stderr)
	}
	var sup, parent int
	if _, err := fmt.Sscanf(r.stdout, "supervisor=%d orphan-ppid=%d\n", &sup, &parent); err != nil || sup <= 1 || parent != sup {
		t.Errorf("the orphan's parent is not the supervisor (%v):\n%s", err, r.stdout)
	}
	if !strings.HasSuffix(r.stdout, "\nreaped\n") {
		t.Errorf("the orphan was not reaped:\n%s", r.stdout)
	}
}

// TestLimitsReachTheAgent: the profile's rlimits bind the agent (a write
// past fsize is refused), and the agent runs inside the run's cgroup.
func TestLimitsReachTheAgent(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	ws := workspace(t)
	write(t, dir, map[string]string{"limits.yaml": "extends: tier1\nlimits:\n  rlimits:\n    nofile: 1000\n    fsize: 1MiB\n    core: 0\n"})
	rp := recordPath(t)
	r := aj(t, "run", "--profile", filepath.Join(dir, "limits.yaml"), "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`ulimit -n; ulimit -Hn; ulimit -c; cat /proc/self/cgroup | grep '^0::'; head -c 2000000 /dev/zero > big; echo "write exit $?"`)
	wantCode(t, r, 0)
	rec := readRecord(t, rp, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || lines[0] != "1000" || lines[1] != "1000" || lines[2] != "0" {
		t.Fatalf("limits inside the jail: %q", r.stdout)
	}
	if own := strings.TrimPrefix(lines[3], "0::"); rec.Limits.Cgroup == "" || !strings.HasSuffix(rec.Limits.Cgroup, "/agentjail/"+rec.RunID) || !strings.HasSuffix(rec.Limits.Cgroup, own) {
		t.Errorf("the agent's cgroup %q, the run's %q", lines[3], rec.Limits.Cgroup)
	}
	if lines[4] == "write exit 0" {
		t.Errorf("a 2 MB write passed a 1 MiB fsize limit")
	}
	if fi, err := os.Stat(filepath.Join(ws, "big")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("the file past fsize: %v %v", fi, err)
	}
	if rec.Limits.Rlimits["nofile"] != "1000" || rec.Limits.Rlimits["fsize"] != "1048576" || rec.Limits.Rlimits["core"] != "0" {
		t.Errorf("record limits %v", rec.Limits.Rlimits)
	}
	if fileExists(rec.Limits.Cgroup) {
		t.Errorf("the run's cgroup %s was left behind", rec.Limits.Cgroup)
	}
}

// TestProcessAndMemoryLimitsReachTheAgent: rlimits nproc and as bind the
// agent (with nproc 1 it cannot fork, under as a 128 MiB buffer cannot be
// had). They are rlimits only: the jail's cgroup caps are limits.pids and
// limits.memory (TestDefaultCaps), which they leave as they are.
func TestProcessAndMemoryLimitsReachTheAgent(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{
		"nproc.yaml": "extends: tier1\nlimits:\n  rlimits:\n    nproc: 1\n",
		"as.yaml":    "extends: tier1\nlimits:\n  rlimits:\n    as: 64MiB\n",
	})
	for _, c := range []struct {
		name, script, stdout, stderr string
		code                         int
		rlimit, value                string
	}{
		// dash cannot fork the background job and gives up (exit 2).
		{"nproc", `ulimit -p; true & echo forked`, "1\n", "Cannot fork", 2, "nproc", "1"},
		{"as", `ulimit -v; dd if=/dev/zero of=/dev/null bs=128M count=1; echo "dd exit $?"`, "65536\ndd exit 1\n", "memory exhausted", 0, "as", "67108864"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			r := aj(t, "run", "--profile", filepath.Join(dir, c.name+".yaml"), "--record", rp, "--", "sh", "-c", c.script)
			wantCode(t, r, c.code)
			if r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("stdout %q, want %q; stderr lacks %q:\n%s", r.stdout, c.stdout, c.stderr, r.stderr)
			}
			rec := readRecord(t, rp, c.code)
			wantDegradationsPrinted(t, r.stderr, rec, "rlimit."+c.rlimit)
			if rec.Limits.Rlimits[c.rlimit] != c.value {
				t.Errorf("record rlimits %v, want %s %s", rec.Limits.Rlimits, c.rlimit, c.value)
			}
			if l := rec.Limits; l.PidsMax != nil && *l.PidsMax != 4096 || l.MemoryMax != nil && *l.MemoryMax == 64<<20 {
				t.Errorf("the rlimit set a cgroup limit: pids_max %v, memory_max %v", l.PidsMax, l.MemoryMax)
			}
		})
	}
}

// TestSIGHUPAndSIGQUITEndTheRunAfterTheGrace: like SIGTERM, they are
// forwarded to the jail and, when the agent survives them, followed by
// SIGKILL after the grace; exit 128+n, reason interrupted.
func TestSIGHUPAndSIGQUITEndTheRunAfterTheGrace(t *testing.T) {
	jailed(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		name := map[syscall.Signal]string{syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}[sig]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := workspace(t)
			rp := recordPath(t)
			b := start(t, nil, "run", "--grace", "1", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
				`trap '' HUP QUIT; touch ready; while :; do sleep 0.1; done`)
			waitFile(t, b, filepath.Join(ws, "ready"))
			b.cmd.Process.Signal(sig)
			code := b.wait(t)
			wantCode(t, result{code: code, stderr: b.stderr.String()}, 128+int(sig))
			rec := readRecord(t, rp, 128+int(sig))
			if rec.Reason != "interrupted" || rec.Signal == nil || *rec.Signal != name || !slices.Equal(rec.sent(), []string{name, "SIGCONT", "SIGKILL"}) {
				t.Fatalf("reason %s, signal %v, sent %v", rec.Reason, str(rec.Signal), rec.sent())
			}
			first, _ := time.Parse(recordTime, rec.SignalsSent[0].At)
			kill, _ := time.Parse(recordTime, rec.SignalsSent[2].At)
			if kill.Sub(first) < time.Second {
				t.Errorf("SIGKILL %v after %s, before the 1s grace", kill.Sub(first), name)
			}
			if len(rec.SignalsReceived) != 1 || rec.SignalsReceived[0].Signal != name {
				t.Errorf("signals received %+v", rec.SignalsReceived)
			}
		})
	}
}

// TestSIGUSR1AndSIGUSR2AreOnlyForwarded: the agent gets them and traps
// them, the run goes on and ends as the agent does.
func TestSIGUSR1AndSIGUSR2AreOnlyForwarded(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := recordPath(t)
	b := start(t, nil, "run", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`trap 'touch got-usr1' USR1; trap 'touch got-usr2' USR2; touch ready
		while [ ! -e go ]; do sleep 0.05; done; echo done; exit 4`)
	waitFile(t, b, filepath.Join(ws, "ready"))
	b.cmd.Process.Signal(syscall.SIGUSR1)
	waitFile(t, b, filepath.Join(ws, "got-usr1"))
	b.cmd.Process.Signal(syscall.SIGUSR2)
	waitFile(t, b, filepath.Join(ws, "got-usr2"))
	write(t, ws, map[string]string{"go": ""})
	code := b.wait(t)
	wantCode(t, result{code: code, stderr: b.stderr.String()}, 4)
	rec := readRecord(t, rp, 4)
	if rec.Reason != "exit" || rec.Signal != nil || b.stdout.String() != "done\n" {
		t.Errorf("reason %s, signal %v, stdout %q", rec.Reason, str(rec.Signal), b.stdout.String())
	}
	if !slices.Equal(rec.sent(), []string{"SIGUSR1", "SIGUSR2"}) || rec.SignalsSent[0].Target != "group" {
		t.Errorf("signals sent %+v", rec.SignalsSent)
	}
	if len(rec.SignalsReceived) != 2 || rec.SignalsReceived[0].Signal != "SIGUSR1" || rec.SignalsReceived[1].Signal != "SIGUSR2" {
		t.Errorf("signals received %+v", rec.SignalsReceived)
	}
}

// TestTimeoutZeroMeansNone: `--timeout 0` lifts the profile's wall limit
// (the run outlives it; the record says 0), and without the flag the
// profile's limit holds.
func TestTimeoutZeroMeansNone(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"short.yaml": "extends: tier1\nlimits:\n  wall: 1s\n  grace: 0\n"})
	profile := filepath.Join(dir, "short.yaml")
	for _, c := range []struct {
		name   string
		flags  []string
		code   int
		reason string
		wallMS int64
	}{
		{"--timeout 0", []string{"--timeout", "0"}, 0, "exit", 0},
		{"no flag", nil, 124, "wall_timeout", 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			args := slices.Concat([]string{"run", "--profile", profile, "--record", rp}, c.flags, []string{"--", "sleep", "2"})
			r := aj(t, args...)
			wantCode(t, r, c.code)
			if rec := readRecord(t, rp, c.code); rec.Reason != c.reason || rec.Limits.WallMS != c.wallMS {
				t.Errorf("reason %s, wall_ms %d; want %s, %d", rec.Reason, rec.Limits.WallMS, c.reason, c.wallMS)
			}
		})
	}
}

// TestMessagesAfterTheRunStartOnTheirOwnLine: the agent's stderr ended
// mid-line; agentjail's messages after the run (here a violation) start on
// a line of their own, not glued to the agent's last words.
func TestMessagesAfterTheRunStartOnTheirOwnLine(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	r := aj(t, "run", "--write", ws, "--chdir", ws, "--", "sh", "-c",
		"mkdir -p n/.git/hooks && echo evil > n/.git/hooks/post-checkout; printf 'no newline' >&2")
	wantCode(t, r, 123)
	if !strings.Contains(r.stderr, "no newline\nagentjail: ") {
		t.Errorf("agentjail's message does not start on a new line:\n%q", r.stderr)
	}
	r = aj(t, "run", "--write", ws, "--chdir", ws, "--", "sh", "-c",
		"mkdir -p m/.git/hooks && echo evil > m/.git/hooks/post-checkout; echo 'a newline' >&2")
	wantCode(t, r, 123)
	if !strings.Contains(r.stderr, "a newline\nagentjail: ") {
		t.Errorf("a newline too many, or none:\n%q", r.stderr)
	}
}

// TestEnvByName: --env NAME passes agentjail's own value into the jail, so
// a secret need not appear on agentjail's command line.
func TestEnvByName(t *testing.T) {
	jailed(t)
	r := invocation{env: []string{"AJ_TEST_TOKEN=tok-" + token()}}.run(t, "run", "--env", "AJ_TEST_TOKEN", "--", "sh", "-c", `echo "got=$AJ_TEST_TOKEN"`)
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "got=tok-1000.") {
		t.Errorf("the jail got %q", r.stdout)
	}
}

// TestDegradedRunLeavesNothingRunning: a jail that shares agentjail's pid
// namespace (the /proc fallback) has no namespace teardown to end what the
// agent left, and a non-root agentjail has no cgroup either; a daemon
// started with `setsid env -i` also escapes the marker sweep. agentjail, a
// subreaper, kills every process still below it once the jail has ended.
// The check runs inside the wrapper's pid namespace, right after agentjail
// returns (the namespace's end would kill the daemon anyway).
func TestDegradedRunLeavesNothingRunning(t *testing.T) {
	jailed(t)
	weak := weakProfile(t)
	tok := token()
	rp := filepath.Join(visibleDir(t), "record.json")
	wrap := []string{"unshare", "-mpf", "--mount-proc", "sh", "-c", `mount --bind /dev/null /proc/timer_list &&
setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/ XDG_RUNTIME_DIR=` + visibleDir(t) + ` "$@"; code=$?
if pgrep -f "^sleep ` + tok + `" >/dev/null; then echo LEFT-RUNNING; else echo NOTHING-LEFT; fi
exit $code`, "sh"}
	r := invocation{wrap: wrap}.run(t, "run", "--profile", weak, "--record", rp, "--", "sh", "-c",
		// The agent ends once its daemon is sleep, not still the sh that
		// execs it: the record names what it killed by its command line.
		`setsid env -i /bin/sh -c "exec sleep `+tok+`" </dev/null >/dev/null 2>&1 &
until pgrep -f "^sleep `+tok+`" >/dev/null; do sleep 0.05; done; echo started`)
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "agentjail: degraded: jail: no fresh /proc and no pid namespace") {
		t.Fatalf("the jail did not share agentjail's pid namespace:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "NOTHING-LEFT") {
		t.Errorf("the agent's daemon outlived the run:\n%s%s", r.stdout, r.stderr)
	}
	rec := readRecord(t, rp, 0)
	if !slices.ContainsFunc(rec.Orphans, func(o orphan) bool { return strings.Contains(o.Cmd, "sleep "+tok) }) {
		t.Errorf("the record's orphans lack the daemon: %+v", rec.Orphans)
	}
}

// TestDegradedRunGivesEveryProcessTheGrace: without a pid namespace and
// without a cgroup (TestDegradedRunLeavesNothingRunning's setting, agentjail
// not root), the timeout's SIGTERM still reaches a process that called
// setsid and was orphaned (a double fork): re-parented to agentjail, the
// subreaper, it is found below agentjail.
func TestDegradedRunGivesEveryProcessTheGrace(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	rp := filepath.Join(visibleDir(t), "record.json")
	wrap := []string{"unshare", "-mpf", "--mount-proc", "sh", "-c", `mount --bind /dev/null /proc/timer_list &&
exec setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/ XDG_RUNTIME_DIR=` + visibleDir(t) + ` "$@"`, "sh"}
	r := invocation{wrap: wrap}.run(t, "run", "--profile", weakProfile(t), "--timeout", "4", "--grace", "30", "--write", ws, "--chdir", ws, "--record", rp, "--", "sh", "-c",
		`(setsid sh -c 'trap "touch got-term; exit 0" TERM; while :; do sleep 0.1; done' &)
trap 'until [ -e got-term ]; do sleep 0.05; done; exit 0' TERM; while :; do sleep 0.1; done`)
	wantCode(t, r, 124)
	if !strings.Contains(r.stderr, "agentjail: degraded: jail: no fresh /proc and no pid namespace") {
		t.Fatalf("the jail did not share agentjail's pid namespace:\n%s", r.stderr)
	}
	rec := readRecord(t, rp, 124)
	var targets []string
	for _, s := range rec.SignalsSent {
		targets = append(targets, s.Signal+">"+s.Target)
	}
	if !fileExists(filepath.Join(ws, "got-term")) || !slices.Contains(targets, "SIGTERM>others") || slices.Contains(rec.sent(), "SIGKILL") {
		t.Errorf("got-term written: %v; signals sent %v; stderr:\n%s", fileExists(filepath.Join(ws, "got-term")), targets, r.stderr)
	}
}

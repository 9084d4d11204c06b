package supervise

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
)

// run runs spec with the test's streams and returns the outcome; a run
// that does not end within a minute fails the test (a hang detector, not
// a timed assertion).
func run(t *testing.T, spec Spec) (Outcome, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader(""), &stdout, &stderr
	out := runWithin(t, spec, time.Minute, &stderr)
	return out, stdout.String(), stderr.String()
}

// runWithin runs spec as it is; a run that fails, or does not end within
// limit (a hang detector), fails the test, saying what stderr (when not
// nil) holds.
func runWithin(t *testing.T, spec Spec, limit time.Duration, stderr *bytes.Buffer) Outcome {
	t.Helper()
	type result struct {
		out Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := Run(spec)
		done <- result{out, err}
	}()
	said := func() string {
		if stderr == nil {
			return ""
		}
		return stderr.String()
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Run: %v\nstderr: %s", r.err, said())
		}
		return r.out
	case <-time.After(limit):
		t.Fatalf("the run did not end within %v; stderr so far: %s", limit, said())
	}
	panic("unreachable")
}

func sent(r record.Record) []string {
	var out []string
	for _, s := range r.SignalsSent {
		out = append(out, s.Signal+">"+s.Target)
	}
	return out
}

// TestRunPassesTheExitThrough: the command's output and exit code pass
// through; bwrap's report of a signal death is 128+n, which the record
// calls ambiguous.
func TestRunPassesTheExitThrough(t *testing.T) {
	t.Parallel()
	out, stdout, stderr := run(t, fakeSpec(t, "sh", "-c", "echo out; echo err >&2; exit 7"))
	r := out.Record
	if r.Reason != record.ReasonExit || r.ExitCode != 7 || r.AgentExitCode == nil || *r.AgentExitCode != 7 {
		t.Errorf("reason %s, exit %d, agent %v", r.Reason, r.ExitCode, r.AgentExitCode)
	}
	if stdout != "out\n" || stderr != "err\n" || r.Bytes.Stdout != 4 || r.Bytes.Stderr != 4 {
		t.Errorf("stdout %q stderr %q bytes %+v", stdout, stderr, r.Bytes)
	}
	if len(r.SignalsSent) != 0 || len(r.Orphans) != 0 {
		t.Errorf("a clean exit sent %v, found orphans %v", sent(r), r.Orphans)
	}

	out, _, _ = run(t, fakeSpec(t, "sh", "-c", "kill -USR1 $$"))
	r = out.Record
	if r.Reason != record.ReasonSignal || r.ExitCode != 128+10 || !r.AgentSignalAmbiguous || r.AgentSignal == nil || *r.AgentSignal != "SIGUSR1" {
		t.Errorf("death by SIGUSR1: reason %s, exit %d, signal %v, ambiguous %v", r.Reason, r.ExitCode, r.AgentSignal, r.AgentSignalAmbiguous)
	}
}

// TestRunEscalates: at the wall limit the jail's group gets SIGTERM (and
// SIGCONT); an agent that traps it gets SIGKILL after the grace; exit 124
// either way, every signal in the record with its target.
func TestRunEscalates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		script string
		want   []string
	}{
		{"ends on SIGTERM", "sleep 100", []string{"SIGTERM>group", "SIGCONT>group"}},
		{"traps SIGTERM", "trap '' TERM; while :; do sleep 0.05; done", []string{"SIGTERM>group", "SIGCONT>group", "SIGKILL>group"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := fakeSpec(t, "sh", "-c", c.script)
			spec.Wall, spec.Grace = 300*time.Millisecond, 300*time.Millisecond
			r := runRecord(t, spec)
			if r.Reason != record.ReasonWallTimeout || r.ExitCode != record.ExitTimeout {
				t.Errorf("reason %s, exit %d", r.Reason, r.ExitCode)
			}
			got := sent(r)
			if c.name == "ends on SIGTERM" && slices.Equal(got, c.want[:1]) {
				// The group ended by SIGTERM before its SIGCONT, which
				// then reached no one and is not recorded.
				got = c.want
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("signals sent %v, want %v", got, c.want)
			}
		})
	}
}

func runRecord(t *testing.T, spec Spec) record.Record {
	t.Helper()
	out, _, _ := run(t, spec)
	return out.Record
}

// TestRunIdleTimeout: output keeps the run alive; silence ends it.
func TestRunIdleTimeout(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t, "sh", "-c", "i=0; while [ $i -lt 6 ]; do echo tick; sleep 0.1; i=$((i+1)); done; sleep 100")
	spec.Idle, spec.Grace = 400*time.Millisecond, time.Second
	r := runRecord(t, spec)
	if r.Reason != record.ReasonIdleTimeout || r.ExitCode != record.ExitTimeout || r.Bytes.Stdout != 6*5 {
		t.Errorf("reason %s, exit %d, %d bytes", r.Reason, r.ExitCode, r.Bytes.Stdout)
	}
}

// TestRunForwardsSignals: a SIGTERM agentjail receives reaches the group
// and ends the run as interrupted (128+15); a SIGUSR1 only reaches the
// agent.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	signals := make(chan os.Signal, 2)
	spec := fakeSpec(t, "sh", "-c", "trap 'echo usr1' USR1; echo ready; while :; do sleep 0.05; done")
	spec.Signals, spec.Grace = signals, 5*time.Second
	var stdout bytes.Buffer
	ready := make(chan struct{})
	spec.StdoutTap = writerFunc(func(p []byte) {
		if bytes.Contains(p, []byte("ready")) {
			close(ready)
		}
	})
	go func() {
		<-ready
		signals <- syscall.SIGUSR1
		time.Sleep(200 * time.Millisecond)
		signals <- syscall.SIGTERM
	}()
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader(""), &stdout, &bytes.Buffer{}
	out, err := Run(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Record
	if r.Reason != record.ReasonInterrupted || r.ExitCode != 128+15 || r.Signal == nil || *r.Signal != "SIGTERM" {
		t.Errorf("reason %s, exit %d, signal %v", r.Reason, r.ExitCode, r.Signal)
	}
	if !strings.Contains(stdout.String(), "usr1") {
		t.Errorf("SIGUSR1 did not reach the agent: %q", stdout.String())
	}
	if got := sent(r); len(got) < 2 || got[0] != "SIGUSR1>group" || got[1] != "SIGTERM>group" {
		t.Errorf("signals sent %v", got)
	}
}

// TestRunHurriedDeliveryGivesUp: a second SIGTERM while the run is
// already ending (here in the grace of the first, which the agent
// ignores) asks for agentjail gone now: once the jail has ended, a reader
// of agentjail's stdout that takes nothing is given up on at once, not
// after stallWait. watch takes that signal, not the delivery wait, so the
// run must remember it (the race TestStalledReaderDoesNotHangTheRun met).
func TestRunHurriedDeliveryGivesUp(t *testing.T) {
	t.Parallel()
	signals := make(chan os.Signal, 2)
	spec := fakeSpec(t, "sh", "-c", "trap '' TERM; head -c 300000 /dev/zero; while :; do sleep 0.05; done")
	spec.Signals, spec.Grace = signals, 30*time.Second
	stalled, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	var once sync.Once
	spec.Stdin, spec.Stderr = strings.NewReader(""), &bytes.Buffer{}
	spec.Stdout = writerFunc(func([]byte) {
		once.Do(func() { close(stalled) })
		<-release // a reader that never reads
	})
	go func() {
		<-stalled
		signals <- syscall.SIGTERM // ignored by the agent: the grace runs
		signals <- syscall.SIGTERM // no more grace, and no more waiting
	}()
	out := runWithin(t, spec, 2*stallWait, nil)
	// A run that forgot the second SIGTERM gives up only after stallWait,
	// and says so.
	w := strings.Join(out.Record.Warnings, "\n")
	if !out.Abandoned[0] || !strings.Contains(w, "agentjail's stdout stopped taking output; gave up on SIGTERM") {
		t.Errorf("abandoned %v, warnings:\n%s", out.Abandoned, w)
	}
}

// TestRunHurriedDeliveryWaitsForALiveReader: told to hurry the same way,
// agentjail still delivers everything to a reader that is slow but keeps
// taking bytes (150 ms a piece here, under hurryWait): only a reader that
// takes nothing is given up on.
func TestRunHurriedDeliveryWaitsForALiveReader(t *testing.T) {
	t.Parallel()
	signals := make(chan os.Signal, 1)
	spec := fakeSpec(t, "sh", "-c", "trap '' TERM; head -c 300000 /dev/zero; while :; do sleep 0.05; done")
	spec.Signals, spec.Wall, spec.Grace = signals, 300*time.Millisecond, 30*time.Second
	var got atomic.Int64
	spec.Stdin, spec.Stderr = strings.NewReader(""), &bytes.Buffer{}
	spec.Stdout = writerFunc(func(p []byte) {
		time.Sleep(150 * time.Millisecond)
		got.Add(int64(len(p)))
	})
	// After the wall limit: a signal while the run is ending. (Were it to
	// come first, it would only start the ending; delivery is the same.)
	time.AfterFunc(600*time.Millisecond, func() { signals <- syscall.SIGTERM })
	out := runWithin(t, spec, time.Minute, nil)
	if got.Load() != 300000 || out.Abandoned[0] || strings.Contains(strings.Join(out.Record.Warnings, "\n"), "stopped taking") {
		t.Errorf("delivered %d of 300000 bytes, abandoned %v, warnings %q", got.Load(), out.Abandoned, out.Record.Warnings)
	}
}

// TestRunSignalsEveryProcess: a timeout's SIGTERM and one agentjail
// receives reach a process of the jail in a session of its own (setsid),
// outside every group the supervisor signals as a group: it gets its
// SIGTERM before the grace ends, not only the SIGKILL after it.
func TestRunSignalsEveryProcess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		wall time.Duration
		sig  os.Signal
	}{{"wall limit", time.Second, nil}, {"SIGTERM", 0, syscall.SIGTERM}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			signals := make(chan os.Signal, 1)
			spec := fakeSpec(t, "sh", "-c", `setsid sh -c 'trap "touch \"$0/got-term\"; exit 0" TERM; echo ready; while :; do sleep 0.05; done' "$0" &
trap 'wait; exit 0' TERM; wait`, dir)
			spec.Signals, spec.Wall, spec.Grace = signals, c.wall, 30*time.Second
			ready := make(chan struct{})
			var once sync.Once
			spec.StdoutTap = writerFunc(func(p []byte) {
				if bytes.Contains(p, []byte("ready")) {
					once.Do(func() { close(ready) })
				}
			})
			go func() {
				select {
				case <-ready:
				case <-time.After(time.Minute):
				}
				if c.sig != nil {
					signals <- c.sig
				}
			}()
			r := runRecord(t, spec)
			select {
			case <-ready:
			default:
				t.Fatal("the process in a session of its own never started")
			}
			if _, err := os.Stat(dir + "/got-term"); err != nil || !slices.Contains(sent(r), "SIGTERM>others") || slices.Contains(sent(r), "SIGKILL>group") {
				t.Errorf("the process in a session of its own got no SIGTERM (%v); signals sent %v", err, sent(r))
			}
		})
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// TestRunSweepsWhatLeftTheGroup: a process that left the jail's process
// group (setsid) outlives the sandbox; the marker sweep finds it, kills it
// and lists it as an orphan, and nothing of the run is left.
func TestRunSweepsWhatLeftTheGroup(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t, "sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & sleep 0.2")
	r := runRecord(t, spec)
	if r.Reason != record.ReasonExit || len(r.Orphans) != 1 || !strings.Contains(r.Orphans[0].Cmd, "sleep 1000") {
		t.Fatalf("reason %s, orphans %+v", r.Reason, r.Orphans)
	}
	left, err := procs.MarkedBy("/proc", spec.RunID, procs.Since{})
	if err != nil || len(left) != 0 {
		t.Errorf("still carrying the marker: %+v %v", left, err)
	}
}

// TestRunSetupFailure: a jail that never ran its command (the sandbox
// could not start it, and bwrap wrote no exit-code) is a setup failure,
// never taken for the agent's exit.
func TestRunSetupFailure(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t, "/nonexistent/agent")
	var stderr bytes.Buffer
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader(""), &bytes.Buffer{}, &stderr
	out, err := Run(spec)
	r := out.Record
	if err == nil || r.Reason != record.ReasonSetupFailed || r.ExitCode != record.ExitSetup || r.AgentExitCode != nil {
		t.Errorf("err %v, reason %s, exit %d, agent %v", err, r.Reason, r.ExitCode, r.AgentExitCode)
	}
}

// TestRunSandboxGoneBeforeAdoption: when bwrap's child fails a mount and
// is gone before the supervisor opens its pidfd, the run is bwrap's setup
// failure (its message above), not a pidfd_open error.
func TestRunSandboxGoneBeforeAdoption(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t, "true")
	spec.Env = append(spec.Env, fakeMountFailsEnv+"=1")
	var stderr bytes.Buffer
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader(""), &bytes.Buffer{}, &stderr
	out, err := Run(spec)
	r := out.Record
	if err == nil || r.Reason != record.ReasonSetupFailed || !strings.Contains(err.Error(), "bubblewrap could not set up the jail (exit 1)") {
		t.Errorf("err %v, reason %s; stderr: %s", err, r.Reason, stderr.String())
	}
}

// TestRunHandsTheControlChannelOver: with Spec.Control, the exec stage
// (the Go one, in the fake jail) finds its channel at execstage.FDControl
// and the listener it makes reaches Control before Run returns; without
// it, nothing of the supervisor's is open at that number in the jail.
func TestRunHandsTheControlChannelOver(t *testing.T) {
	t.Parallel()
	spec := fakeSpec(t, os.Args[0], "--control-fd", strconv.Itoa(execstage.FDControl), "--listen", "127.0.0.1:0", "--", "true")
	spec.Env = append(spec.Env, fakeStageEnv+"=1")
	var got []execstage.Message
	spec.Control = func(m execstage.Message, files []*os.File) {
		got = append(got, m)
		for _, f := range files {
			if v, err := unix.GetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
				t.Errorf("%s: not a listening socket (%d, %v)", m.Addr, v, err)
			}
			f.Close()
		}
		if len(files) != 1 {
			t.Errorf("%+v came with %d files", m, len(files))
		}
	}
	out, _, stderr := run(t, spec)
	if r := out.Record; r.Reason != record.ReasonExit || r.ExitCode != 0 || len(r.Warnings) != 0 {
		t.Fatalf("reason %s, exit %d, warnings %q, stderr %q", r.Reason, r.ExitCode, r.Warnings, stderr)
	}
	if len(got) != 1 || got[0].Kind != execstage.KindListener || !strings.HasPrefix(got[0].Addr, "127.0.0.1:") {
		t.Errorf("Control got %+v", got)
	}

	spec = fakeSpec(t, "sh", "-c", "test -e /proc/self/fd/"+strconv.Itoa(execstage.FDControl)+" && exit 3; exit 0")
	if out, _, _ := run(t, spec); out.Record.ExitCode != 0 {
		t.Errorf("without Control, descriptor %d is open in the jail", execstage.FDControl)
	}
}

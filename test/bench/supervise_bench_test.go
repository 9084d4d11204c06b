package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/procs"
)

// gib2 is what the output benchmark writes: 2 GiB in 1 MiB writes, so the
// writer is never the bottleneck.
var gib2 = []string{"dd", "if=/dev/zero", "bs=1M", "count=2048", "status=none"}

const gib2Bytes = 2 << 30

// devNull runs cmd with stdout and stderr on /dev/null from /, with a
// minimal environment.
func devNull(name string, args ...string) error {
	return devNullEnv(nil, name, args...)
}

// devNullEnv is devNull with env added to the environment.
func devNullEnv(env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = append([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, env...), "/"
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, errOut.String())
	}
	return nil
}

func mbps(d time.Duration) float64 { return float64(gib2Bytes) / 1e6 / d.Seconds() }

// BenchmarkOutputThroughput: 2 GiB through `agentjail run` (its output
// pipes, idle tracking, head/tail capture, byte counts; the launch is
// included) against the same writer piped through cat(1), and with --log
// against tee(1). Targets: ≥ 0.9× cat's MB/s with --log off, ≥ tee's with
// it on.
func BenchmarkOutputThroughput(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	dir, err := os.MkdirTemp("/var/tmp", "agentjail-bench-log-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	log := filepath.Join(dir, "log")
	pipeline := shellWords(gib2)
	for range b.N {
		ref, subj := compare(b, "output 2 GiB, --log off", samples(5),
			"dd | cat", func() error { return devNull("sh", "-c", pipeline+" | cat") },
			"agentjail run -- dd", func() error { return devNull(agentjail, append([]string{"run", "--"}, gib2...)...) })
		report(b, "cat", ref, subj, 0.9)
		ref, subj = compare(b, "output 2 GiB, --log on", samples(5),
			"dd | tee FILE", func() error { os.Remove(log); return devNull("sh", "-c", pipeline+" | tee "+log) },
			"agentjail run --log FILE -- dd", func() error {
				os.Remove(log)
				return devNull(agentjail, append([]string{"run", "--log", log, "--"}, gib2...)...)
			})
		report(b, "tee", ref, subj, 1.0)
	}
}

// report prints both throughputs and agentjail's share of the reference.
func report(b *testing.B, refName string, ref, subj time.Duration, target float64) {
	share := mbps(subj) / mbps(ref)
	fmt.Printf("%-28s %s %.0f MB/s, agentjail %.0f MB/s: %.3f× (target ≥ %.1f×)\n", "", refName, mbps(ref), mbps(subj), share, target)
	b.ReportMetric(share, "x-"+refName)
}

func shellWords(w []string) string {
	s := ""
	for _, a := range w {
		s += " " + a
	}
	return s[1:]
}

// BenchmarkMarkerSweep: one sweep of /proc for a run's marker (what
// `agentjail run` does after every run, and `agentjail init` periodically)
// with 2000 more processes alive, half of them carrying another run's
// marker; against `pgrep -f`, which reads every process's command line
// once. Target: ≤ 50 ms.
func BenchmarkMarkerSweep(b *testing.B) {
	var alive []*exec.Cmd
	defer func() {
		for _, p := range alive {
			p.Process.Kill()
			p.Wait()
		}
	}()
	for i := range 2000 {
		p := exec.Command("sleep", "600")
		p.Env = []string{"PATH=/usr/bin:/bin"}
		if i%2 == 0 {
			p.Env = append(p.Env, "AGENTJAIL_RUN=another-run-"+strconv.Itoa(i%7))
		}
		if err := p.Start(); err != nil {
			b.Fatalf("start process %d: %v", i, err)
		}
		alive = append(alive, p)
	}
	pgrep := func() error {
		// pgrep exits 1 when nothing matches, as here.
		if err := exec.Command("pgrep", "-f", "this-run-marker-matches-nothing").Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				return err
			}
		}
		return nil
	}
	sweep := func() error {
		_, err := procs.KillMarked("/proc", "this-run-marker-matches-nothing")
		return err
	}
	for range b.N {
		_, subj := compare(b, "marker sweep, 2000+ processes", samples(50),
			"pgrep -f (every cmdline)", pgrep, "procs.KillMarked", sweep)
		fmt.Printf("%-28s sweep median %.2f ms: %.2f× the 50 ms target\n", "", ms2(subj), ms2(subj)/50)
		b.ReportMetric(ms2(subj)/50, "x-target")
	}
}

// BenchmarkClaudeOutputThroughput: 2 GiB of stream-json events (1 KiB
// assistant lines, as a busy claude prints) through `agentjail run -- claude
// --output-format stream-json`, where agentjail parses what passes for the
// record's claude object, against the same writer piped through cat(1).
// The "claude" here is a script that replays the lines. Target: ≥ 0.9× cat.
func BenchmarkClaudeOutputThroughput(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	// Outside /tmp and /var/tmp, which the jail covers with its own tmpfs.
	dir, err := os.MkdirTemp("/var/lib", "agentjail-bench-claude-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	line := `{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", 900) + `"}]},"session_id":"00000000-0000-0000-0000-000000000000"}` + "\n"
	events := filepath.Join(dir, "events.jsonl")
	chunk := strings.Repeat(line, (64<<20)/len(line))
	reps := gib2Bytes / len(chunk)
	if err := os.WriteFile(events, []byte(chunk), 0o644); err != nil {
		b.Fatal(err)
	}
	replay := fmt.Sprintf("i=0; while [ $i -lt %d ]; do cat %s; i=$((i+1)); done", reps, events)
	claude := filepath.Join(dir, "claude")
	if err := os.WriteFile(claude, []byte("#!/bin/sh\n"+replay+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	total := float64(reps * len(chunk))
	for range b.N {
		ref, subj := compare(b, "stream-json 2 GiB, parsed", samples(5),
			"replay | cat", func() error { return devNull("sh", "-c", replay+" | cat") },
			"agentjail run -- claude", func() error {
				return devNull(agentjail, "run", "--", claude, "--print", "--output-format", "stream-json", "--verbose", "x")
			})
		share := ref.Seconds() / subj.Seconds()
		fmt.Printf("%-28s cat %.0f MB/s, agentjail %.0f MB/s: %.3f× (target ≥ 0.9×)\n", "", total/1e6/ref.Seconds(), total/1e6/subj.Seconds(), share)
		b.ReportMetric(share, "x-cat")
	}
}

// BenchmarkRunIdleCPU: what `agentjail run` costs while its agent waits
// (an agent waits on its API most of a run): the supervisor's CPU time
// and context switches over 4 s of a jail that sleeps, from 2 s after its
// start, on a built-in profile (limits polled, the broker up), beside
// timeout(1) supervising the same sleep. No target: timeout(1) polls
// nothing, so a ratio says nothing; the numbers do.
func BenchmarkRunIdleCPU(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	for range b.N {
		var line []string
		for _, sup := range []struct {
			name string
			argv []string
		}{
			{"timeout(1)", []string{"timeout", "10", "sleep", "10"}},
			{"agentjail run", []string{agentjail, "run", "--", "sleep", "10"}},
		} {
			cpu, switches, err := idleCost(sup.argv, 2*time.Second, 4*time.Second)
			if err != nil {
				b.Fatalf("%s: %v", sup.name, err)
			}
			perS := func(v float64) float64 { return v / 4 }
			line = append(line, fmt.Sprintf("%s %.2f ms CPU and %.0f context switches a second", sup.name, perS(float64(cpu)/1e6), perS(float64(switches))))
			if sup.argv[0] == agentjail {
				b.ReportMetric(perS(float64(cpu)/1e6), "ms-cpu/s")
				b.ReportMetric(perS(float64(switches)), "switches/s")
			}
		}
		fmt.Printf("idle supervisor: %s\n", strings.Join(line, ", "))
	}
}

// idleCost starts argv, waits settle, and returns the CPU time (ns) and
// context switches of its process over the next span, summed over its
// threads (/proc/PID/task/*/schedstat and status).
func idleCost(argv []string, settle, span time.Duration) (cpu, switches int64, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	read := func() (int64, int64, error) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", cmd.Process.Pid))
		if err != nil || len(tasks) == 0 {
			return 0, 0, fmt.Errorf("no threads: it exited")
		}
		var cpu, switches int64
		for _, t := range tasks {
			if data, err := os.ReadFile(t + "/schedstat"); err == nil {
				if f := strings.Fields(string(data)); len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					cpu += n
				}
			}
			if data, err := os.ReadFile(t + "/status"); err == nil {
				for _, l := range strings.Split(string(data), "\n") {
					if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
						n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
						switches += n
					}
				}
			}
		}
		return cpu, switches, nil
	}
	time.Sleep(settle)
	cpu0, sw0, err := read()
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(span)
	cpu1, sw1, err := read()
	if err != nil {
		return 0, 0, err
	}
	return cpu1 - cpu0, sw1 - sw0, nil
}

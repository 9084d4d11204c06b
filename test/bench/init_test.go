package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inits are the reference inits BenchmarkReaping compares agentjail init
// with (Debian packages tini, dumb-init, catatonit), each as PID 1.
var inits = []struct{ name, path string }{
	{"tini", "tini"},
	{"dumb-init", "dumb-init"},
	{"catatonit", "catatonit"},
	{"agentjail init", ""}, // agentjail, filled in at run time
}

// BenchmarkReaping: 20 000 double-forked orphans, each init as PID 1 of a
// fresh pid namespace (as in a container). The orphans wait on a pipe and
// are released in waves of 1 000; the clock runs from each release to the
// last zombie of the wave reaped, so the rate is reaping throughput, not
// the generator's fork speed (testdata/orphans.c). Waves, because every
// wait for "any child" walks the list of children up to the first zombie:
// with 20 000 released at once, the order in which they happen to exit
// decides a quadratic term that swung every init's rate by ±50% from run
// to run.
//
// Each run is pinned to one CPU (taskset), as in a container limited to
// one: the init's own work then adds to the wave's time instead of hiding
// on the other CPU, and the run-to-run spread drops from about ±15% to
// ±5%. Most of a wave is still the kernel's work for each exit, which no
// init can change. The inits take turns, round after round (each goes first
// in turn), and the ratio to tini is the median of the ratios within a
// round; each init's own CPU per orphan is reported too.
// Target: agentjail's orphans/s >= 1.0x tini's.
func BenchmarkReaping(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: each init runs as PID 1 of a new pid namespace")
	}
	gen := buildOrphans(b)
	cpu := lastCPU(b)
	const orphans, wave = 20000, 1000
	type sample struct{ rate, cpuUS float64 }
	var present []int
	for i, in := range inits {
		if in.path == "" {
			inits[i].path = agentjail
		} else if _, err := exec.LookPath(in.path); err != nil {
			fmt.Printf("reaping: %s is not installed (make deps-bench): left out\n", in.name)
			continue
		}
		present = append(present, i)
	}
	var rounds [][]sample // [round][init]
	for range b.N {
		for round := range samples(15) {
			r := make([]sample, len(inits))
			for k := range present {
				i := present[(k+round)%len(present)] // each init goes first in turn
				argv := []string{"taskset", "-c", strconv.Itoa(cpu), "unshare", "-fp", "--mount-proc", inits[i].path}
				if inits[i].name == "agentjail init" {
					argv = append(argv, "init")
				}
				out, err := exec.Command(argv[0], append(argv[1:], "--", gen, strconv.Itoa(orphans), strconv.Itoa(wave))...).CombinedOutput()
				if err != nil {
					b.Fatalf("%s: %v\n%s", inits[i].name, err, out)
				}
				var n int
				var secs float64
				var ut, st uint64
				if _, err := fmt.Sscanf(string(out), "%d %g %d %d", &n, &secs, &ut, &st); err != nil || n != orphans {
					b.Fatalf("%s: unexpected output %q", inits[i].name, out)
				}
				// clock ticks are 1/100 s (sysconf(_SC_CLK_TCK) on Linux)
				r[i] = sample{float64(n) / secs, float64(ut+st) * 1e4 / float64(n)}
			}
			rounds = append(rounds, r)
		}
	}
	// of is one quantity, round by round, sorted.
	of := func(f func(r []sample) float64) []float64 {
		v := make([]float64, len(rounds))
		for k, r := range rounds {
			v[k] = f(r)
		}
		slices.Sort(v)
		return v
	}
	mid := func(v []float64) float64 { return v[len(v)/2] }
	tiniThere := slices.Contains(present, 0) // inits[0] is tini
	fmt.Printf("reaping %d double-forked orphans in waves of %d as PID 1, pinned to CPU %d, %d rounds, medians:\n", orphans, wave, cpu, len(rounds))
	for _, i := range present {
		rate := of(func(r []sample) float64 { return r[i].rate })
		line := fmt.Sprintf("  %-15s %8.0f orphans/s   init CPU %5.1f µs/orphan", inits[i].name, mid(rate),
			mid(of(func(r []sample) float64 { return r[i].cpuUS })))
		if tiniThere {
			rel := of(func(r []sample) float64 { return r[i].rate / r[0].rate })
			line += fmt.Sprintf("   %.3f× tini (rounds %.3f–%.3f)", mid(rel), rel[0], rel[len(rel)-1])
		}
		fmt.Println(line)
	}
	aj := len(inits) - 1
	b.ReportMetric(mid(of(func(r []sample) float64 { return r[aj].rate })), "orphans/s")
	b.ReportMetric(mid(of(func(r []sample) float64 { return r[aj].cpuUS })), "init-µs/orphan")
	if tiniThere {
		b.ReportMetric(mid(of(func(r []sample) float64 { return r[aj].rate / r[0].rate })), "ratio-vs-tini")
	}
}

// lastCPU is the highest CPU this process may run on: the reaping runs are
// pinned there.
func lastCPU(b *testing.B) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		b.Fatalf("sched_getaffinity: %v", err)
	}
	for cpu := len(set)*64 - 1; cpu >= 0; cpu-- {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	b.Fatal("sched_getaffinity: no CPU")
	return 0
}

// BenchmarkInitIdleRSS: the resident memory of `agentjail init` as PID 1,
// idle while its command sleeps, next to tini's. Target: <= 3 MiB
// (issue 15).
func BenchmarkInitIdleRSS(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: init runs as PID 1 of a new pid namespace")
	}
	for range b.N {
		var line []string
		for _, in := range []struct{ name, path string }{{"tini", "tini"}, {"agentjail init", agentjail}} {
			if _, err := exec.LookPath(in.path); err != nil {
				continue
			}
			argv := []string{"unshare", "-fp", "--mount-proc", in.path}
			if in.path == agentjail {
				argv = append(argv, "init")
			}
			kib, comm, err := idleRSS(append(argv, "--", "sleep", "1000"))
			if err != nil {
				b.Fatalf("%s: %v", in.name, err)
			}
			name := in.name
			if !strings.HasPrefix(in.name, comm) {
				name += " (PID 1 is " + comm + ")"
			}
			line = append(line, fmt.Sprintf("%s %.1f MiB", name, float64(kib)/1024))
			if in.path == agentjail {
				b.ReportMetric(float64(kib)/1024, "MiB")
			}
		}
		fmt.Printf("idle RSS as PID 1: %s (target for agentjail init: <= 3 MiB)\n", strings.Join(line, ", "))
	}
}

// idleRSS starts argv (unshare … INIT -- sleep), finds the init, and
// returns its VmRSS in KiB once two readings 200 ms apart agree, and its
// name (agentjail init hands over to agentjail-init).
func idleRSS(argv []string) (int, string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	init, sleeper := 0, 0
	for (init == 0 || sleeper == 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		init = childOf(cmd.Process.Pid)
		sleeper = childOf(init)
	}
	if sleeper == 0 {
		return 0, "", fmt.Errorf("init or its command did not start")
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", init))
	if err != nil {
		return 0, "", err
	}
	defer syscall.Kill(init, syscall.SIGKILL) // ends the namespace
	// Idle: past start-up and what init does a second in (agentjail-init
	// lets go of the pages its start-up touched then).
	time.Sleep(3 * time.Second)
	deadline = time.Now().Add(10 * time.Second)
	last := -1
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		kib, err := vmRSS(init)
		if err != nil {
			return 0, "", err
		}
		if kib == last {
			return kib, strings.TrimSpace(string(comm)), nil
		}
		last = kib
	}
	return last, strings.TrimSpace(string(comm)), nil
}

func vmRSS(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// childOf returns a child of pid, or 0.
func childOf(pid int) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(data, ')')
		var state string
		var ppid int
		if end < 0 || len(data) < end+2 {
			continue
		}
		if _, err := fmt.Sscanf(string(data[end+2:]), "%s %d", &state, &ppid); err == nil && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			return child
		}
	}
	return 0
}

// buildOrphans compiles testdata/orphans.c, statically when the C library
// allows it: a static binary forks faster, so the inits' share shows more.
func buildOrphans(b *testing.B) string {
	b.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Skip("needs a C compiler for the orphan generator (make deps installs gcc)")
	}
	out := filepath.Join(b.TempDir(), "orphans")
	if err := exec.Command(cc, "-O2", "-static", "-o", out, "testdata/orphans.c").Run(); err != nil {
		if msg, err := exec.Command(cc, "-O2", "-o", out, "testdata/orphans.c").CombinedOutput(); err != nil {
			b.Fatalf("cc testdata/orphans.c: %v\n%s", err, msg)
		}
	}
	return out
}

// Package bench holds agentjail's benchmarks (`make bench`). Each compares
// agentjail with a reference measured in the same run, interleaved sample
// by sample, and reports medians and their ratio: machine noise moves both
// sides alike. Tests never assert on time; benchmarks only report.
package bench

import (
	"encoding/json"
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

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/profiles"
	"github.com/agentjail/agentjail/seccomp"
)

var agentjail string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentjail-bench-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	if agentjail, err = testutil.Build(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// samples is how many interleaved pairs each benchmark takes
// (AGENTJAIL_BENCH_N overrides).
func samples(def int) int {
	if n, err := strconv.Atoi(os.Getenv("AGENTJAIL_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return def
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// compare runs ref and subject alternately n times and reports medians and
// the subject/reference ratio of times (below 1: the subject is faster),
// also as benchmark metrics.
func compare(b *testing.B, name string, n int, refName string, ref func() error, subjName string, subject func() error) (time.Duration, time.Duration) {
	b.Helper()
	var rs, ss []time.Duration
	for i := range n {
		order := []int{0, 1} // alternate who goes first
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			f, dst := ref, &rs
			if k == 1 {
				f, dst = subject, &ss
			}
			start := time.Now()
			if err := f(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			*dst = append(*dst, time.Since(start))
		}
	}
	mr, ms := median(rs), median(ss)
	ratio := float64(ms) / float64(mr)
	fmt.Printf("%-28s %-34s median %8.3f ms\n%-28s %-34s median %8.3f ms   time ratio %.3f× (n=%d)\n",
		name, refName, ms2(mr), "", subjName, ms2(ms), ratio, n)
	b.ReportMetric(ms2(mr), "ref-ms")
	b.ReportMetric(ms2(ms), "agentjail-ms")
	b.ReportMetric(ratio, "ratio")
	return mr, ms
}

func ms2(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkLaunch: `agentjail run --profile tier1 -- /bin/true` against bare
// bwrap running the very argv agentjail renders, seccomp filters included
// (minus the pipes only agentjail passes), as the same run user. Target: ratio <= 1.15.
func BenchmarkLaunch(b *testing.B) {
	ref, env := launchReference(b)
	subject := func() error {
		cmd := exec.Command(agentjail, "run", "--profile", "tier1", "--", "/bin/true")
		cmd.Env, cmd.Dir = env, "/"
		return cmd.Run()
	}
	for range b.N {
		compare(b, "launch (tier1, /bin/true)", samples(300), "bare bwrap, same argv and user", ref, "agentjail run", subject)
	}
}

// BenchmarkLaunchFloor: what any supervisor written in Go pays before it
// does anything — the start and exit of a Go program whose main is empty —
// against the same reference as BenchmarkLaunch. Its ratio is the share of
// BenchmarkLaunch's 1.15× budget (0.15 of the reference) that process
// start-up alone takes, before policy, rendering, fork/exec of bwrap and
// waiting for it.
func BenchmarkLaunchFloor(b *testing.B) {
	ref, _ := launchReference(b)
	empty := filepath.Join(b.TempDir(), "empty")
	if out, err := exec.Command("go", "build", "-o", empty, "./testdata/empty").CombinedOutput(); err != nil {
		b.Fatalf("go build testdata/empty: %v\n%s", err, out)
	}
	subject := func() error { return exec.Command(empty).Run() }
	for range b.N {
		compare(b, "launch floor", samples(300), "bare bwrap, same argv and user", ref, "an empty Go program", subject)
	}
}

// launchReference returns BenchmarkLaunch's reference — bare bwrap with the
// argv agentjail renders for tier1 — and the environment both run with.
func launchReference(b *testing.B) (func() error, []string) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail drops to the run user, and so must the reference")
	}
	out, err := exec.Command(agentjail, "render", "--json", "--profile", "tier1", "--chdir", "/", "--", "/bin/true").Output()
	if err != nil {
		b.Fatal(err)
	}
	var plan struct {
		Argv []string          `json:"argv"`
		FDs  map[string]string `json:"fds"`
		User struct{ UID, GID int }
	}
	if err := json.Unmarshal(out, &plan); err != nil {
		b.Fatal(err)
	}
	// The reference keeps the filters (bwrap loads them: part of the cost
	// of a jail) and drops only the pipes agentjail alone uses.
	pol, ok := profiles.Precompiled("tier1")
	if !ok {
		b.Fatal("no built-in profile tier1")
	}
	filters, err := seccomp.Filters(pol, os.ReadFile, seccomp.CurrentHost())
	if err != nil {
		b.Fatal(err)
	}
	var extra []*os.File
	for i, f := range filters {
		bpf, err := seccomp.Compile(f)
		if err != nil {
			b.Fatal(err)
		}
		file, err := seccomp.File(strconv.Itoa(i), bpf)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { file.Close() })
		extra = append(extra, file)
	}
	var bare []string
	// The run's own directories (the private Claude Code directory) are
	// named after its id; render shows a placeholder, which the reference
	// gets as a plain directory.
	for i, a := range plan.Argv {
		if strings.Contains(a, "<run-id>") && i > 0 && plan.Argv[i-1] == "--bind" {
			if err := os.MkdirAll(a, 0o755); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(filepath.Dir(a)) })
		}
	}
	for i := 0; i < len(plan.Argv); i++ {
		if role, isFD := plan.FDs[strconv.Itoa(i)]; isFD {
			if n, ok := strings.CutPrefix(role, "seccomp-"); ok {
				k, err := strconv.Atoi(n)
				if err != nil || k >= len(extra) {
					b.Fatalf("render names filter %q; the profile compiles %d", role, len(extra))
				}
				bare = append(bare, strconv.Itoa(3+k)) // ExtraFiles[k]
			}
			continue
		}
		if role, nextIsFD := plan.FDs[strconv.Itoa(i+1)]; nextIsFD && strings.HasPrefix(role, "seccomp-") {
			bare = append(bare, plan.Argv[i])
			continue
		}
		if _, nextIsFD := plan.FDs[strconv.Itoa(i+1)]; nextIsFD {
			continue // the flag whose value is an fd
		}
		bare = append(bare, plan.Argv[i])
	}
	env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	ref := func() error {
		cmd := exec.Command(bare[0], bare[1:]...)
		cmd.Env, cmd.Dir = env, "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(plan.User.UID), Gid: uint32(plan.User.GID)}}
		cmd.ExtraFiles = extra
		for _, f := range extra { // bwrap read the last run's copy to the end
			if _, err := f.Seek(0, 0); err != nil {
				return err
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	// The reference must really be filtered: the same argv, asking.
	probe := append(slices.Clone(bare[:len(bare)-1]), "/bin/grep", "-q", "^Seccomp:[[:space:]]*2", "/proc/self/status")
	bare, probe = probe, bare
	if err := ref(); err != nil {
		b.Fatalf("the reference jail runs without a seccomp filter: %v", err)
	}
	bare = probe
	return ref, env
}

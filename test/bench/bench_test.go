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

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/seccomp"
)

var agentjail string

func TestMain(m *testing.M) {
	if os.Getenv(warmEnv) != "" {
		os.Exit(warmLaunches())
	}
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
// also as benchmark metrics; beside it, the median of the ratios within
// each pair of samples, which a host whose speed drifts during the run
// moves less.
func compare(b *testing.B, name string, n int, refName string, ref func() error, subjName string, subject func() error) (time.Duration, time.Duration) {
	return compareSettled(b, name, n, refName, ref, subjName, subject, func() {})
}

// compareSettled is compare with settle called, untimed, after each
// sample of either side.
func compareSettled(b *testing.B, name string, n int, refName string, ref func() error, subjName string, subject func() error, settle func()) (time.Duration, time.Duration) {
	b.Helper()
	c := measure(b, name, n, refName, ref, subjName, subject, settle)
	return median(c.ref), median(c.subj)
}

// comparison is what measure timed: each side's samples, in order, so
// that ref[i] and subj[i] ran next to each other.
type comparison struct{ ref, subj []time.Duration }

// paired is the median of subj[i]/ref[i].
func (c comparison) paired() float64 {
	r := make([]float64, len(c.ref))
	for i := range c.ref {
		r[i] = float64(c.subj[i]) / float64(c.ref[i])
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// measure is compareSettled, returning the samples.
func measure(b *testing.B, name string, n int, refName string, ref func() error, subjName string, subject func() error, settle func()) comparison {
	b.Helper()
	var c comparison
	for i := range n {
		order := []int{0, 1} // alternate who goes first
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			f, dst := ref, &c.ref
			if k == 1 {
				f, dst = subject, &c.subj
			}
			start := time.Now()
			if err := f(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			*dst = append(*dst, time.Since(start))
			settle()
		}
	}
	mr, ms := median(c.ref), median(c.subj)
	ratio := float64(ms) / float64(mr)
	fmt.Printf("%-28s %-34s median %8.3f ms\n%-28s %-34s median %8.3f ms   time ratio %.3f× (paired %.3f×, n=%d)\n",
		name, refName, ms2(mr), "", subjName, ms2(ms), ratio, c.paired(), n)
	b.ReportMetric(ms2(mr), "ref-ms")
	b.ReportMetric(ms2(ms), "agentjail-ms")
	b.ReportMetric(ratio, "ratio")
	return c
}

func ms2(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkLaunch: `agentjail run -- /bin/true` against bare bwrap running
// the very argv agentjail renders, seccomp filters included, as the same
// run user, with no code of agentjail's in it: a static true program is
// bound where the exec stage would be and is the jail's command (the pipes
// only agentjail passes are left out). For tier1 as shipped, and for a
// writable repository with a submodule and a linked worktree (every piece
// of git metadata protected). Each also through the resident launcher:
// `agentjail-run` with `agentjail launcher` up (docs/launcher.md), against
// the same reference. Target: ratio <= 2.0.
func BenchmarkLaunch(b *testing.B) {
	repo := repository(b)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"tier1, /bin/true", nil},
		{"tier1, repo with submodule and worktree", []string{"--user", "1000", "--write", repo}},
	} {
		args := append([]string{"--profile", "tier1"}, c.args...)
		ref, env := launchReference(b, args...)
		subject := func() error {
			cmd := exec.Command(agentjail, append(append([]string{"run"}, args...), "--", "/bin/true")...)
			cmd.Env, cmd.Dir = env, "/"
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
		for range b.N {
			compare(b, "launch ("+c.name+")", samples(300), "bare bwrap, same argv, no agentjail code", ref, "agentjail run", subject)
		}
		client := launcherClient(b, env, args)
		for range b.N {
			compare(b, "launch ("+c.name+")", samples(300), "bare bwrap, same argv, no agentjail code", ref,
				"agentjail-run, `agentjail launcher` up", client)
		}
	}
}

// launcherClient starts `agentjail launcher` for the benchmark's life and
// returns a launch of `agentjail-run ARGS -- /bin/true` through it.
func launcherClient(b *testing.B, env, args []string) func() error {
	sock := filepath.Join(b.TempDir(), "launcher.sock")
	daemon := exec.Command(agentjail, "launcher", "--socket", sock)
	daemon.Env, daemon.Dir, daemon.Stderr = env, "/", os.Stderr
	if err := daemon.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { daemon.Process.Signal(syscall.SIGTERM); daemon.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("agentjail launcher made no socket at %s in 10 s", sock)
		}
	}
	time.Sleep(100 * time.Millisecond) // its first worker started
	client := filepath.Join(filepath.Dir(agentjail), "agentjail-run")
	return func() error {
		cmd := exec.Command(client, append(append([]string{}, args...), "--", "/bin/true")...)
		cmd.Env, cmd.Dir = append(env, "AGENTJAIL_LAUNCHER="+sock), "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
}

// BenchmarkLaunchFloor: what any supervisor written in Go pays before it
// does anything — the start and exit of a Go program whose main is empty —
// against the same reference as BenchmarkLaunch. Its ratio is what process
// start-up alone adds to BenchmarkLaunch's (the target, 2.0×, allows 1.0
// of the reference for all of agentjail), before policy, rendering,
// fork/exec of bwrap and waiting for it.
func BenchmarkLaunchFloor(b *testing.B) {
	ref, _ := launchReference(b, "--profile", "tier1")
	empty := filepath.Join(b.TempDir(), "empty")
	if out, err := exec.Command("go", "build", "-o", empty, "./testdata/empty").CombinedOutput(); err != nil {
		b.Fatalf("go build testdata/empty: %v\n%s", err, out)
	}
	subject := func() error { return exec.Command(empty).Run() }
	for range b.N {
		compare(b, "launch floor", samples(300), "bare bwrap, same argv and user", ref, "an empty Go program", subject)
	}
}

// launchReference returns BenchmarkLaunch's reference for `agentjail run
// ARGS -- /bin/true`: bare bwrap with the argv agentjail renders, where
// the exec stage's binary is a static true program that is the jail's
// whole command; and the environment both run with.
func launchReference(b *testing.B, args ...string) (func() error, []string) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail drops to the run user, and so must the reference")
	}
	out, err := exec.Command(agentjail, append(append([]string{"render", "--json", "--chdir", "/"}, args...), "--", "/bin/true")...).Output()
	if err != nil {
		b.Fatal(err)
	}
	var plan struct {
		Argv    []string          `json:"argv"`
		FDs     map[string]string `json:"fds"`
		Profile string            `json:"profile"`
		User    struct{ UID, GID int }
	}
	if err := json.Unmarshal(out, &plan); err != nil {
		b.Fatal(err)
	}
	// The reference keeps the filters (bwrap loads them: part of the cost
	// of a jail) and drops only the pipes agentjail alone uses.
	pol, err := launch.Loader(nil).Load(plan.Profile)
	if err != nil {
		b.Fatal(err)
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
	truth := staticTrue(b)
	var bare []string
	// The run's own directories (the private Claude Code directory) and
	// files (git's excludes file of the masks) are named after its id;
	// render shows a placeholder, which the reference gets as a plain
	// directory, or an empty file.
	for i, a := range plan.Argv {
		if !strings.Contains(a, "<run-id>") || i == 0 {
			continue
		}
		switch plan.Argv[i-1] {
		case "--bind":
			if err := os.MkdirAll(a, 0o755); err != nil {
				b.Fatal(err)
			}
		case "--ro-bind":
			if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(a, nil, 0o644); err != nil {
				b.Fatal(err)
			}
		default:
			continue
		}
		top := a[:strings.Index(a, "<run-id>")+len("<run-id>")]
		b.Cleanup(func() { os.RemoveAll(top) })
	}
	for i := 0; i < len(plan.Argv); i++ {
		a := plan.Argv[i]
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
		if role, nextIsFD := plan.FDs[strconv.Itoa(i+1)]; nextIsFD && !strings.HasPrefix(role, "seccomp-") {
			continue // the flag whose value is a pipe of agentjail's
		}
		if a == "--ro-bind" && i+2 < len(plan.Argv) && plan.Argv[i+2] == execstage.Path {
			bare = append(bare, a, truth, execstage.Path)
			i += 2
			continue
		}
		if a == "--" { // bwrap's own: the exec stage and the command follow
			bare = append(bare, "--", execstage.Path)
			break
		}
		bare = append(bare, a)
	}
	if !slices.Contains(bare, truth) {
		b.Fatalf("render bound no exec stage at %s: %q", execstage.Path, plan.Argv)
	}
	env := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	run := func(argv []string) error {
		cmd := exec.Command(argv[0], argv[1:]...)
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
	if err := run(probe); err != nil {
		b.Fatalf("the reference jail runs without a seccomp filter: %v", err)
	}
	return func() error { return run(bare) }, env
}

// staticTrue builds a static program that exits 0 at once (the C library
// is linked in: nothing but the kernel's exec and the program's exit).
func staticTrue(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "agentjail-bench-true-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	b.Cleanup(func() { os.RemoveAll(dir) })
	src, bin := filepath.Join(dir, "true.c"), filepath.Join(dir, "true")
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-static", "-o", bin, src).CombinedOutput(); err != nil {
		b.Fatalf("gcc -static: %v\n%s", err, out)
	}
	return bin
}

// repository makes a writable repository of the run user's: a git
// superproject with one submodule and one linked worktree, for the launch
// that protects what git reads in each.
func repository(b *testing.B) string {
	b.Helper()
	root, err := os.MkdirTemp("/var/tmp", "agentjail-bench-repo-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	git := func(dir string, args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.name=b", "-c", "user.email=b@b"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	sub, proj := filepath.Join(root, "sub"), filepath.Join(root, "proj")
	for _, d := range []string{sub, proj} {
		os.MkdirAll(d, 0o755)
		git(d, "init", "-q", "-b", "main")
		os.WriteFile(filepath.Join(d, "README"), []byte("x\n"), 0o644)
		git(d, "add", "README")
		git(d, "commit", "-q", "-m", "x")
	}
	git(proj, "submodule", "add", "-q", sub, "lib")
	git(proj, "commit", "-q", "-m", "sub")
	git(proj, "worktree", "add", "-q", filepath.Join(proj, "wt"), "-b", "wt")
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 1000, 1000) })
	return proj
}

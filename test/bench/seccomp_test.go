package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentjail/agentjail/seccomp"
)

// BenchmarkSeccompCompile: compiling a profile's built-in filter, which
// every launch (and render) does. Reference: an empty filter, the fixed
// cost of libseccomp and of exporting through a memfd.
func BenchmarkSeccompCompile(b *testing.B) {
	empty := seccomp.Filter{Source: "empty", Default: seccomp.Action{Kind: seccomp.Allow}}
	for _, sealed := range []bool{false, true} {
		f := seccomp.Builtin(sealed)
		for range b.N {
			compare(b, "compile "+f.Source, samples(300), "empty filter", func() error {
				_, err := seccomp.Compile(empty)
				return err
			}, "built-in filter", func() error {
				_, err := seccomp.Compile(f)
				return err
			})
		}
	}
}

// BenchmarkSeccompLaunch: what the filter adds to a launch. Two profiles
// that differ only in seccomp.default, each running /bin/true, interleaved.
// Target: the filter adds < 2 ms (difference of the medians).
func BenchmarkSeccompLaunch(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root, as BenchmarkLaunch")
	}
	dir := b.TempDir()
	os.Chmod(dir, 0o755)
	// A profile of its own (a child cannot turn a parent's filter off),
	// with the caps every profile must have.
	const common = "description: bench\nenvironment:\n  allow: [PATH]\nlimits:\n  pids: 4096\n  memory: 1GiB\nfilesystem:\n  tmpfs:\n    /tmp: {size: 64MiB}\n"
	with, without := filepath.Join(dir, "with.yaml"), filepath.Join(dir, "without.yaml")
	if err := os.WriteFile(with, []byte(common), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(without, []byte(common+"seccomp:\n  default: false\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	launch := func(profile string) func() error {
		return func() error {
			cmd := exec.Command(agentjail, "run", "--profile", profile, "--", "/bin/true")
			cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	for range b.N {
		ref, sub := compare(b, "launch with vs without filter", samples(200), "seccomp.default: false", launch(without), "built-in filter", launch(with))
		fmt.Printf("%-28s the filter adds %.3f ms to a launch (target < 2 ms)\n", "", ms2(sub-ref))
		b.ReportMetric(ms2(sub-ref), "added-ms")
	}
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

const mod = "github.com/agentjail/agentjail/"

// ev is one test2json line.
func ev(action, pkg, test, output string, elapsed float64) string {
	return fmt.Sprintf(`{"Action":%q,"Package":%q,"Test":%q,"Output":%q,"Elapsed":%v}`, action, mod+pkg, test, output, elapsed)
}

// A passing package, a failing one (a test with a failing subtest), a
// skip with its reason, go test's own lines passed on.
var stream = []string{
	ev("start", "policy", "", "", 0),
	ev("run", "policy", "TestA", "", 0),
	ev("output", "policy", "TestA", "=== RUN   TestA\n", 0),
	ev("pass", "policy", "TestA", "", 0.1),
	ev("run", "policy", "TestB", "", 0),
	ev("output", "policy", "TestB", "=== RUN   TestB\n", 0),
	ev("output", "policy", "TestB", "    b_test.go:9: needs the arm64 cross toolchain (make test-release)\n", 0),
	ev("output", "policy", "TestB", "--- SKIP: TestB (0.00s)\n", 0),
	ev("skip", "policy", "TestB", "", 0),
	ev("output", "policy", "", "PASS\n", 0),
	ev("pass", "policy", "", "", 1.5),
	"go: downloading example.com/x v1.0.0",
	ev("start", "mounts", "", "", 0),
	ev("run", "mounts", "TestC", "", 0),
	ev("output", "mounts", "TestC", "=== RUN   TestC\n", 0),
	ev("run", "mounts", "TestC/sub", "", 0),
	ev("output", "mounts", "TestC/sub", "    c_test.go:20: got 1, want 2\n", 0),
	ev("output", "mounts", "TestC/sub", "    c_test.go:31: the run printed: "+strings.Repeat("x", 400)+"\n", 0),
	ev("output", "mounts", "TestC/sub", "        its second line\n", 0),
	ev("fail", "mounts", "TestC/sub", "", 0),
	ev("output", "mounts", "TestC", "--- FAIL: TestC (0.00s)\n", 0),
	ev("fail", "mounts", "TestC", "", 0),
	ev("output", "mounts", "", "FAIL\n", 0),
	ev("fail", "mounts", "", "", 2.25),
}

func feed(p *progress, lines []string, now time.Time) {
	for _, l := range lines {
		p.line([]byte(l), now)
	}
}

func TestProgress(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Unix(1000, 0)
	p := newProgress(&out, t0)
	feed(p, stream, t0)
	p.summary(t0.Add(95 * time.Second))
	want := `ok    policy                                                 1.5s  1 passed, 1 skipped
go: downloading example.com/x v1.0.0
=== RUN   TestC
    c_test.go:20: got 1, want 2
    c_test.go:31: the run printed: ` + strings.Repeat("x", 400) + `
        its second line
--- FAIL: TestC (0.00s)
FAIL  mounts                                                 2.2s  0 passed, 1 failed
skip  policy TestB: b_test.go:9: needs the arm64 cross toolchain (make test-release)
fail  mounts TestC/sub: c_test.go:20: got 1, want 2 | c_test.go:31: the run printed: ` + strings.Repeat("x", 269) + `…
FAIL: 2 packages, 1 tests passed, 1 failed, 1 skips (listed above) (failed: mounts) in 1m35s
`
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestProgressQuiet: after 30 s without a line, one names the tests that
// run (not those paused), and the next comes 30 s later.
func TestProgressQuiet(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Unix(1000, 0)
	p := newProgress(&out, t0)
	feed(p, []string{
		ev("start", "test/integration", "", "", 0),
		ev("run", "test/integration", "TestA", "", 0),
		ev("pause", "test/integration", "TestA", "", 0),
		ev("run", "test/integration", "TestB", "", 0),
		ev("pass", "test/integration", "TestB", "", 0),
		ev("cont", "test/integration", "TestA", "", 0),
		ev("run", "test/integration", "TestA/sub", "", 0),
		ev("run", "test/integration", "TestC", "", 0),
		ev("pause", "test/integration", "TestC", "", 0),
	}, t0)
	for s := 1; s <= 65; s++ {
		p.tick(t0.Add(time.Duration(s) * time.Second))
	}
	want := "..    30s  test/integration (1 passed, running TestA)\n" +
		"..    1m00s  test/integration (1 passed, running TestA)\n"
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// TestProgressTimeout: a timeout's panic is shown, whichever test
// test2json gives it to (here one that has ended), with what the tests
// still running printed.
func TestProgressTimeout(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, time.Unix(0, 0))
	feed(p, []string{
		ev("start", "opsloop", "", "", 0),
		ev("run", "opsloop", "TestA", "", 0),
		ev("output", "opsloop", "TestA", "=== RUN   TestA\n", 0),
		ev("output", "opsloop", "TestA", "    a_test.go:3: waiting for the loop\n", 0),
		ev("run", "opsloop", "TestB", "", 0),
		ev("output", "opsloop", "TestB", "    b_test.go:3: said before the end\n", 0),
		ev("pass", "opsloop", "TestB", "", 0),
		ev("output", "opsloop", "TestB", "panic: test timed out after 15m0s\n", 0),
		ev("output", "opsloop", "TestB", "\t\tTestA (15m0s)\n", 0),
		ev("output", "opsloop", "", "FAIL\t"+mod+"opsloop\t900.1s\n", 0),
		ev("fail", "opsloop", "", "", 900.1),
	}, time.Unix(0, 0))
	want := "=== RUN   TestA\n    a_test.go:3: waiting for the loop\n" +
		"panic: test timed out after 15m0s\n\t\tTestA (15m0s)\n" +
		"FAIL  opsloop                                              900.1s  1 passed\n"
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestProgressBuildFailure(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, time.Unix(0, 0))
	feed(p, []string{
		`{"ImportPath":"` + mod + `policy [` + mod + `policy.test]","Action":"build-output","Output":"# policy\n"}`,
		`{"ImportPath":"` + mod + `policy [` + mod + `policy.test]","Action":"build-output","Output":"policy/a.go:2:12: undefined: y\n"}`,
		`{"ImportPath":"` + mod + `policy [` + mod + `policy.test]","Action":"build-fail"}`,
		ev("start", "policy", "", "", 0),
		ev("output", "policy", "", "FAIL\t"+mod+"policy [build failed]\n", 0),
		ev("fail", "policy", "", "", 0),
	}, time.Unix(0, 0))
	for _, want := range []string{"# policy\npolicy/a.go:2:12: undefined: y\n", "FAIL  policy "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRun: the command's exit status is ours; a failure it reports in its
// output makes ours 1 even when it exits 0.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		lines []string
		exit  int
		want  int
	}{
		{stream[:11], 0, 0},
		{stream, 0, 1},
		{stream, 3, 3},
	} {
		var out, errOut bytes.Buffer
		script := fmt.Sprintf("cat <<'EOF'\n%s\nEOF\nexit %d", strings.Join(c.lines, "\n"), c.exit)
		if got := run([]string{"sh", "-c", script}, &out, &errOut); got != c.want {
			t.Errorf("%d lines, command exit %d: exit %d, want %d\n%s%s", len(c.lines), c.exit, got, c.want, out.String(), errOut.String())
		}
	}
	// A long line (16 times bufio.Scanner's default limit) is passed on whole.
	var out bytes.Buffer
	long := strings.Repeat("x", 1<<20)
	if got := run([]string{"sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x; echo"}, &out, &bytes.Buffer{}); got != 0 || !strings.HasPrefix(out.String(), long+"\n") {
		t.Errorf("a 1 MiB line: exit %d, output of %d bytes", got, out.Len())
	}
	if got := run(nil, os.Stdout, &bytes.Buffer{}); got != 2 {
		t.Errorf("no command: exit %d, want 2", got)
	}
}

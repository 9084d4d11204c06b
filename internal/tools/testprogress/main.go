// Command testprogress runs `go test -json ...` and says how it goes: a
// line for each package as it finishes, the output of each test that
// fails as soon as it fails, a line naming what still runs whenever nothing
// has been said for a while, and at the end the totals, the time taken,
// every skipped test with its reason and every failed one with the first
// lines it reported (a CI log's tail then says what failed, however much a
// failed test printed after its failure). `make test` runs the tests through it:
//
//	go run ./internal/tools/testprogress go test -json -count=1 ./...
//
// It exits with the command's status, or 1 when the command exits 0 yet a
// test or a build failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// quiet is how long the tests may run without a line from us.
const quiet = 30 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "usage: testprogress go test -json [flags] [packages]")
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testprogress: %v\n", err)
		return 1
	}
	// An interrupt reaches go test too (same process group); it prints what
	// failed and exits, and so do we, after it.
	signal.Ignore(syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testprogress: %v\n", err)
		return 1
	}
	p := newProgress(stdout, time.Now())
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mu.Lock()
				p.tick(now)
				mu.Unlock()
			}
		}
	}()
	// Lines of any length: a test may print a long one.
	r := bufio.NewReader(out)
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			mu.Lock()
			p.line(bytes.TrimSuffix(b, []byte("\n")), time.Now())
			mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	close(done)
	werr := cmd.Wait()
	p.summary(time.Now())
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		return ee.ExitCode()
	case werr != nil:
		fmt.Fprintf(stderr, "testprogress: %v\n", werr)
		return 1
	case p.failed > 0 || len(p.failedPkgs) > 0:
		return 1
	}
	return 0
}

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string // build-output, build-fail
}

// pkg is what is known of a package whose tests have started.
type pkg struct {
	output  []event  // every output line, for the tests that fail
	running []string // top-level tests running, not paused
	settled int      // len(output) when a test last ended
	passed  int
	skipped int
	failed  int
}

type progress struct {
	w           io.Writer
	start, said time.Time
	pkgs        map[string]*pkg
	order       []string // packages running, in the order they started
	build       map[string][]string

	npkgs, passed, failed int
	failedPkgs            []string
	skips                 []string // "package TestX: reason"
	fails                 []string // "package TestX/sub: file_test.go:N: what it said"
}

func newProgress(w io.Writer, now time.Time) *progress {
	return &progress{w: w, start: now, said: now, pkgs: map[string]*pkg{}, build: map[string][]string{}}
}

func (p *progress) say(now time.Time, format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
	p.said = now
}

// line takes one line of the command's output: a test2json event, or
// anything else go test printed, which is passed on.
func (p *progress) line(b []byte, now time.Time) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		p.say(now, "%s", b)
		return
	}
	switch e.Action {
	case "build-output":
		p.build[e.ImportPath] = append(p.build[e.ImportPath], e.Output)
		return
	case "build-fail":
		p.say(now, "%s", strings.TrimRight(strings.Join(p.build[e.ImportPath], ""), "\n"))
		return
	}
	k := p.pkgs[e.Package]
	if k == nil {
		k = &pkg{}
		p.pkgs[e.Package] = k
		p.order = append(p.order, e.Package)
	}
	top := e.Test != "" && !strings.Contains(e.Test, "/")
	switch e.Action {
	case "output":
		k.output = append(k.output, e)
	case "run", "cont":
		if top {
			k.running = append(k.running, e.Test)
		}
	case "pause":
		if top {
			k.running = slices.DeleteFunc(k.running, func(s string) bool { return s == e.Test })
		}
	case "pass", "fail", "skip":
		if e.Test == "" {
			p.finish(e, k, now)
			return
		}
		if top {
			k.running = slices.DeleteFunc(k.running, func(s string) bool { return s == e.Test })
		}
		k.settled = len(k.output)
		p.result(e, k, now)
	}
}

// result takes a test's end. Top-level tests are counted; a failure is
// shown at once, with the output of the test and its subtests; a skip, of a
// test or a subtest, is listed at the end.
func (p *progress) result(e event, k *pkg, now time.Time) {
	top := !strings.Contains(e.Test, "/")
	switch {
	case e.Action == "fail":
		if said := reported(k.output, e.Test); said != "" {
			p.fails = append(p.fails, fmt.Sprintf("%s %s: %s", short(e.Package), e.Test, said))
		}
	}
	switch {
	case e.Action == "skip":
		p.skips = append(p.skips, fmt.Sprintf("%s %s: %s", short(e.Package), e.Test, skipReason(k.output, e.Test)))
		if top {
			k.skipped++
		}
	case !top:
	case e.Action == "pass":
		k.passed++
		p.passed++
	case e.Action == "fail":
		k.failed++
		p.failed++
		p.say(now, "%s", outputOf(k.output, e.Test))
	}
}

// outputOf is what test and its subtests printed.
func outputOf(output []event, test string) string {
	var b strings.Builder
	for _, o := range output {
		if o.Test == test && test == "" && goTestLine(o.Output) {
			continue // go test's own verdict: ours follows
		}
		if o.Test == test || test != "" && strings.HasPrefix(o.Test, test+"/") {
			b.WriteString(o.Output)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// finish takes a package's end.
func (p *progress) finish(e event, k *pkg, now time.Time) {
	p.order = slices.DeleteFunc(p.order, func(s string) bool { return s == e.Package })
	delete(p.pkgs, e.Package)
	counts := fmt.Sprintf("%d passed", k.passed)
	if k.skipped > 0 {
		counts += fmt.Sprintf(", %d skipped", k.skipped)
	}
	switch e.Action {
	case "pass":
		p.npkgs++
		if k.passed+k.skipped+k.failed == 0 {
			return // no tests matched: go test's own line says no more
		}
		p.say(now, "ok    %-50s %7.1fs  %s", short(e.Package), e.Elapsed, counts)
	case "fail":
		p.npkgs++
		p.failedPkgs = append(p.failedPkgs, short(e.Package))
		// The tests still running when it failed (a timeout, a panic),
		// then what the package printed outside its tests (a TestMain or a
		// build that failed) and all that came after the last test ended:
		// test2json gives a timeout's panic to whichever test spoke last.
		running := map[string]bool{}
		for _, t := range k.running {
			running[t] = true
			if s := outputOf(k.output, t); s != "" {
				p.say(now, "%s", s)
			}
		}
		var b strings.Builder
		for i, o := range k.output {
			top, _, _ := strings.Cut(o.Test, "/")
			switch {
			case o.Test == "" && goTestLine(o.Output), running[top]:
			case o.Test == "" || i >= k.settled:
				b.WriteString(o.Output)
			}
		}
		if s := strings.TrimRight(b.String(), "\n"); s != "" {
			p.say(now, "%s", s)
		}
		if k.failed > 0 {
			counts += fmt.Sprintf(", %d failed", k.failed)
		}
		p.say(now, "FAIL  %-50s %7.1fs  %s", short(e.Package), e.Elapsed, counts)
	}
}

// tick names what still runs when nothing has been said for a while.
func (p *progress) tick(now time.Time) {
	if now.Sub(p.said) < quiet || len(p.order) == 0 {
		return
	}
	var parts []string
	for _, name := range p.order {
		k := p.pkgs[name]
		s := fmt.Sprintf("%s (%d passed", short(name), k.passed)
		if len(k.running) > 0 {
			s += ", running " + strings.Join(k.running[:min(3, len(k.running))], " ")
			if len(k.running) > 3 {
				s += fmt.Sprintf(" and %d more", len(k.running)-3)
			}
		}
		parts = append(parts, s+")")
	}
	p.say(now, "..    %s  %s", duration(now.Sub(p.start)), strings.Join(parts, "; "))
}

func (p *progress) summary(now time.Time) {
	for _, s := range p.skips {
		fmt.Fprintf(p.w, "skip  %s\n", s)
	}
	for _, s := range p.fails {
		fmt.Fprintf(p.w, "fail  %s\n", s)
	}
	verdict := "ok"
	if p.failed > 0 || len(p.failedPkgs) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(p.w, "%s: %d packages, %d tests passed, %d failed, %d skips (listed above)", verdict, p.npkgs, p.passed, p.failed, len(p.skips))
	if len(p.failedPkgs) > 0 {
		fmt.Fprintf(p.w, " (failed: %s)", strings.Join(p.failedPkgs, " "))
	}
	fmt.Fprintf(p.w, " in %s\n", duration(now.Sub(p.start)))
}

func goTestLine(s string) bool {
	return s == "PASS\n" || s == "FAIL\n" || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "ok  \t")
}

// skipReason is what a skipped test said: its last line of output other
// than the lines go test frames it with.
func skipReason(output []event, test string) string {
	reason := "(no reason given)"
	for _, o := range output {
		if o.Test != test {
			continue
		}
		s := strings.TrimSpace(o.Output)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ") {
			continue
		}
		reason = s
	}
	return reason
}

// reportedLines and reportedBytes bound what the summary repeats of a
// failed test.
const (
	reportedLines = 3
	reportedBytes = 300
)

// reported is the first lines a failed test reported itself (t.Error,
// t.Fatal, t.Log: "file_test.go:N: ..."), not its subtests', each cut to
// reportedBytes; "" when it reported none (a parent of failed subtests).
func reported(output []event, test string) string {
	var said []string
	for _, o := range output {
		if o.Test != test || len(said) == reportedLines {
			continue
		}
		s := strings.TrimSpace(o.Output)
		if file, _, ok := strings.Cut(s, ": "); ok && strings.Contains(file, "_test.go:") && !strings.Contains(file, " ") {
			if len(s) > reportedBytes {
				s = strings.ToValidUTF8(s[:reportedBytes], "") + "…"
			}
			said = append(said, s)
		}
	}
	return strings.Join(said, " | ")
}

// short drops the module path from a package's import path.
func short(path string) string {
	if s, ok := strings.CutPrefix(path, "github.com/agentjail/agentjail/"); ok {
		return s
	}
	return path
}

func duration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

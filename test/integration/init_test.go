package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/testutil"
)

// The tests of `agentjail init`, as tini's and dumb-init's suites test
// theirs: exit codes, signals, reaping, stragglers, the terminal. Modes:
// a plain subreaper under the test, and PID 1 of a fresh pid namespace
// (unshare -fp --mount-proc), which is how a container runs it.

var initModes = []struct {
	name string
	pid1 bool
}{{"subreaper", false}, {"pid1", true}}

// initVerbosity: verbose init reaps with wait4 and names each orphan;
// quiet init has the kernel reap where it can (reaper.BeginAutoreap).
var initVerbosity = []struct {
	name    string
	verbose bool
}{{"verbose", true}, {"quiet", false}}

// TestInitExitCodes: every code 0..255 passes through, and death by signal
// n is 128+n. 256 launches of init and sh take about a second on 8
// workers: no sampling needed.
func TestInitExitCodes(t *testing.T) {
	t.Parallel()
	type run struct {
		argv []string
		want int
	}
	var runs []run
	for code := range 256 {
		runs = append(runs, run{[]string{"sh", "-c", "exit " + strconv.Itoa(code)}, code})
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGSEGV, syscall.SIGINT, syscall.SIGABRT} {
		runs = append(runs, run{[]string{"sh", "-c", fmt.Sprintf("kill -%d $$", sig)}, 128 + int(sig)})
	}
	work := make(chan run)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for r := range work {
				cmd := exec.Command(agentjail, append([]string{"init", "--"}, r.argv...)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Errorf("%q: %v", r.argv, err)
				} else if got := cmd.ProcessState.ExitCode(); got != r.want {
					t.Errorf("%q: exit %d, want %d; stderr %s", r.argv, got, r.want, stderr.String())
				}
			}
		})
	}
	for _, r := range runs {
		work <- r
	}
	close(work)
	wg.Wait()
}

// TestInitExitCodesAsPID1: as PID 1 of a pid namespace (how a container
// runs it; unshare -f passes init's code on), a few samples: the
// command's code, and 128+n for death by signal n.
func TestInitExitCodesAsPID1(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	for _, c := range []struct {
		script string
		want   int
	}{{"exit 0", 0}, {"exit 3", 3}, {"exit 255", 255}, {"kill -TERM $$", 143}, {"kill -KILL $$", 137}} {
		t.Run(c.script, func(t *testing.T) {
			t.Parallel()
			p := startInit(t, true, []string{"init", "--", "sh", "-c", "echo ppid=$PPID; read x; " + c.script})
			p.stdin.Close() // startInit has seen init up: the command may end
			code, stderr := p.wait(t)
			if code != c.want || !p.hasLine("ppid=1") {
				t.Errorf("exit %d, want %d; output %q (init must be PID 1); stderr %s", code, c.want, p.output(), stderr)
			}
		})
	}
}

// TestInitCommandLine: the first non-flag argument starts the command and a
// later "--" is the command's; what cannot start is 127/126 as in a shell;
// mistakes are 125 with one message naming the fix.
func TestInitCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec.sh")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	for _, c := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "without --", args: []string{"init", "printf", "%s,", "a", "--", "-v"}, stdout: "a,--,-v,"},
		{name: "with --", args: []string{"init", "--", "printf", "%s,", "--grace", "--"}, stdout: "--grace,--,"},
		{name: "not found", args: []string{"init", "--", "no-such-command-anywhere"}, code: 127, stderr: "agentjail: init: no-such-command-anywhere: exec: \"no-such-command-anywhere\": executable file not found in $PATH"},
		{name: "not executable", args: []string{"init", "--", notExec}, code: 126, stderr: "permission denied"},
		{name: "no command", args: []string{"init"}, code: 125, stderr: "agentjail: no command to run: write `agentjail init [flags] -- CMD [ARG...]`"},
		{name: "negative grace", args: []string{"init", "--grace", "-1s", "true"}, code: 125, stderr: `duration "-1s" is negative`},
		{name: "bad grace in the environment", env: []string{"AGENTJAIL_INIT_GRACE=soon"}, args: []string{"init", "true"}, code: 125, stderr: `AGENTJAIL_INIT_GRACE`},
		{name: "unknown flag", args: []string{"init", "--reap-harder", "true"}, code: 125, stderr: "flag provided but not defined: --reap-harder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := invocation{env: c.env}.run(t, c.args...)
			wantCode(t, r, c.code)
			if r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("stdout %q, want %q; stderr %q, want it to contain %q", r.stdout, c.stdout, r.stderr, c.stderr)
			}
			if c.code == 125 && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("more than one line on stderr:\n%s", r.stderr)
			}
		})
	}
}

// TestInitReapsOrphans: 500 double-forked orphans are re-parented to
// init and none is left a zombie, as PID 1 and as a subreaper; an orphan
// reports its own parent: init, not the host's init. Verbose init reaps
// them itself and counts them; by default, on a kernel that keeps a
// released child's status for its pidfd (Linux 6.15), the kernel releases
// them at exit (reaper.BeginAutoreap, whose own tests show which mode ran).
func TestInitReapsOrphans(t *testing.T) {
	for _, m := range initModes {
		for _, v := range initVerbosity {
			verbose := v.verbose
			t.Run(m.name+"/"+v.name, func(t *testing.T) {
				testutil.RequireRoot(t) // unshare, and a fair comparison of both modes
				t.Parallel()
				const n = 500 // a double fork costs 10 ms and more on some VMs: the hang detector below allows 30 s
				// The witness outlives its parent, waits until its parent is
				// no longer a child of this script (the subshell that started
				// it), then names its new parent. A parent whose stat cannot
				// be read has just exited: the witness looks again (naming it
				// failed one run in CI).
				script := fmt.Sprintf(`echo ppid=$PPID
(sh -c 'while read -r _ _ _ ppid _ </proc/$$/stat; ! read -r _ _ _ pp _ 2>/dev/null </proc/$ppid/stat || [ "$pp" = '$$' ]; do sleep 0.01; done; echo orphan-ppid=$ppid' &)
i=0; while [ $i -lt %d ]; do (true &); i=$((i+1)); done; echo made; read x; exit 0`, n)
				args := []string{"init", "--", "sh", "-c", script}
				if verbose {
					args = slices.Insert(args, 1, "-v")
				}
				p := startInit(t, m.pid1, args)
				p.waitLine(t, "made")
				if m.pid1 && !p.hasLine("ppid=1") {
					t.Errorf("init was not PID 1: %q", p.output())
				}
				wantPPID := strconv.Itoa(p.pid)
				if m.pid1 {
					wantPPID = "1"
				}
				if got := strings.TrimPrefix(p.waitLine(t, "orphan-ppid="), "orphan-ppid="); got != wantPPID {
					t.Errorf("the orphan's parent is pid %s, want init (%s)", got, wantPPID)
				}
				waitFor(t, func() bool { return zombieChildren(p.pid) == 0 })
				p.stdin.Close()
				code, stderr := p.wait(t)
				if code != 0 {
					t.Fatalf("exit %d\n%s", code, lastLines(stderr, 10))
				}
				switch {
				case verbose:
					// The witness and the n others were init's to reap.
					if want := fmt.Sprintf("exiting with 0; reaped %d orphans", n+1); !strings.Contains(stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, lastLines(stderr, 5))
					}
				case stderr != "":
					t.Errorf("quiet init wrote to stderr:\n%s", lastLines(stderr, 5))
				}
			})
		}
	}
}

// TestInitForwardsSIGTERM: SIGTERM to init (to PID 1, which the kernel
// drops when PID 1 has no handler) reaches a command that traps it and
// exits cleanly.
func TestInitForwardsSIGTERM(t *testing.T) {
	for _, m := range initModes {
		t.Run(m.name, func(t *testing.T) {
			testutil.RequireRoot(t)
			t.Parallel()
			p := startInit(t, m.pid1, []string{"init", "--", "sh", "-c", `trap 'echo got-TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`})
			p.waitLine(t, "ready")
			if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code, stderr := p.wait(t); code != 0 || !p.hasLine("got-TERM") {
				t.Errorf("exit %d, output %q, stderr %s", code, p.output(), stderr)
			}
		})
	}
}

// TestInitSignalsTheProcessGroup: a signal to init reaches every process
// of the command's group (`sh -c 'sleep & sleep'`), not only the leader;
// with --child-only only the leader, and the rest is a straggler ended
// with SIGTERM when the leader exits. SIGUSR1 is used because the
// stragglers' SIGTERM must not be mistaken for the forwarded signal.
func TestInitSignalsTheProcessGroup(t *testing.T) {
	script := `(trap 'echo bg-USR1; exit 0' USR1; trap 'echo bg-TERM; exit 0' TERM; echo bg-ready; while :; do sleep 0.05; done) &
trap 'echo fg-USR1; exit 0' USR1
echo fg-ready
while :; do sleep 0.05; done`
	for _, c := range []struct {
		name    string
		flags   []string
		want    []string
		notWant string
	}{
		{name: "group", want: []string{"fg-USR1", "bg-USR1"}},
		{name: "child only", flags: []string{"--child-only"}, want: []string{"fg-USR1", "bg-TERM"}, notWant: "bg-USR1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"init", "--grace", "1m"}, c.flags...), "--", "sh", "-c", script)
			p := startInit(t, false, args)
			p.waitLine(t, "bg-ready")
			p.waitLine(t, "fg-ready")
			if err := syscall.Kill(p.pid, syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			code, stderr := p.wait(t)
			if code != 0 {
				t.Errorf("exit %d: %s", code, stderr)
			}
			for _, w := range c.want {
				if !p.hasLine(w) {
					t.Errorf("no %s in %q", w, p.output())
				}
			}
			if c.notWant != "" && p.hasLine(c.notWant) {
				t.Errorf("%s in %q", c.notWant, p.output())
			}
		})
	}
}

// TestInitEndsStragglers: what the command leaves behind — here two
// processes in sessions of their own, out of reach of its process group,
// one ending on SIGTERM and one ignoring it — is ended before init exits:
// SIGTERM, the grace, SIGKILL. As PID 1, exiting first would have the
// kernel SIGKILL them unwarned, so "term-handled" proves the order.
//
// Quiet, init has the kernel reap (BeginAutoreap) and must still wait for
// the stragglers; verbose, it reaps them itself and names each step.
func TestInitEndsStragglers(t *testing.T) {
	for _, m := range initModes {
		for _, v := range initVerbosity {
			verbose := v.verbose
			t.Run(m.name+"/"+v.name, func(t *testing.T) {
				testutil.RequireRoot(t)
				t.Parallel()
				args := []string{"init", "--grace", "300ms", "--", "sh", "-c",
					`setsid sh -c 'trap "echo term-handled; exit 0" TERM; echo s1=$$; while :; do sleep 0.05; done' &
setsid sh -c 'trap "" TERM; echo s2=$$; while :; do sleep 0.05; done' &
read x; exit 5`}
				if verbose {
					args = slices.Insert(args, 1, "-v")
				}
				p := startInit(t, m.pid1, args)
				s1 := strings.TrimPrefix(p.waitLine(t, "s1="), "s1=")
				s2 := strings.TrimPrefix(p.waitLine(t, "s2="), "s2=")
				var fds []int
				if !m.pid1 { // their pids are ours to check only outside a pid namespace
					for _, s := range []string{s1, s2} {
						pid, _ := strconv.Atoi(s)
						fd, err := unix.PidfdOpen(pid, 0)
						if err != nil {
							t.Fatalf("pidfd_open(%s): %v", s, err)
						}
						t.Cleanup(func() { unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); unix.Close(fd) })
						fds = append(fds, fd)
					}
				}
				p.stdin.Close()
				code, stderr := p.wait(t)
				if code != 5 {
					t.Errorf("exit %d, want the command's 5\n%s", code, stderr)
				}
				if !p.hasLine("term-handled") {
					t.Errorf("the straggler that handles SIGTERM did not get it: %q\n%s", p.output(), stderr)
				}
				want := "sending SIGKILL to pid " + s2
				if m.pid1 {
					want = "sending SIGKILL to every process of the pid namespace"
				}
				if verbose && !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
				for i, fd := range fds {
					if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != unix.ESRCH {
						t.Errorf("straggler s%d is still there after init exited (%v)", i+1, err)
					}
				}
			})
		}
	}
}

// TestInitGivesTheCommandTheTerminal: with stdin a terminal init holds in
// the foreground, the command's process group gets the foreground, so it
// reads the terminal without SIGTTIN stopping it; init, now in the
// background, writes its log with TOSTOP set without SIGTTOU stopping it.
// Either stop would hang the run and fail the test at its deadline.
func TestInitGivesTheCommandTheTerminal(t *testing.T) {
	t.Parallel()
	master, slave := openPTY(t)
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag |= unix.TOSTOP
	tio.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(agentjail, "init", "-v", "--", "sh", "-c",
		`read line; echo "got=$line"; echo "init-pgrp=$(cut -d' ' -f5 /proc/$PPID/stat)"; echo "pgrp-tpgid=$(cut -d' ' -f5,8 /proc/self/stat)"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, master); close(copied) }() // ends with EIO when the last slave closes
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("init did not finish in a minute (stopped by SIGTTIN or SIGTTOU?)")
	}
	<-copied
	text := strings.ReplaceAll(out.String(), "\r\n", "\n")
	if err != nil {
		t.Fatalf("init: %v\n%s", err, text)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			fields[k] = v
		}
	}
	pg := strings.Fields(fields["pgrp-tpgid"])
	if fields["got"] != "hello" || len(pg) != 2 || pg[0] != pg[1] || pg[0] == fields["init-pgrp"] {
		t.Errorf("the command should read the terminal in its own foreground group:\n%s", text)
	}
	if !strings.Contains(text, "agentjail: init: exiting with 0") {
		t.Errorf("init's log in the background is missing:\n%s", text)
	}
}

// TestInitRunsJails: init wrapping a shell loop that runs jails — the
// container entrypoint agentjail is for — as PID 1 and as a subreaper.
func TestInitRunsJails(t *testing.T) {
	for _, m := range initModes {
		t.Run(m.name, func(t *testing.T) {
			jailed(t)
			script := fmt.Sprintf(`for i in 1 2 3; do %[1]s run --profile tier1 -- true || exit 1; done
%[1]s run --profile tier1 -- sh -c 'echo in-jail; exit 7'`, agentjail)
			p := startInit(t, m.pid1, []string{"init", "--", "sh", "-c", script})
			p.stdin.Close()
			if code, stderr := p.wait(t); code != 7 || !p.hasLine("in-jail") {
				t.Errorf("exit %d, want 7; output %q\n%s", code, p.output(), stderr)
			}
		})
	}
}

// initProc is a running `agentjail init`.
type initProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	pid    int // init's pid, seen from the test
	mu     sync.Mutex
	lines  []string
	exited chan error
	eof    chan struct{} // stdout closed by every process holding it
}

// startInit starts agentjail with args; with pid1 as PID 1 of a fresh pid
// namespace.
func startInit(t *testing.T, pid1 bool, args []string) *initProc {
	t.Helper()
	argv := append([]string{agentjail}, args...)
	if pid1 {
		testutil.RequireRoot(t)
		argv = append([]string{"unshare", "-fp", "--mount-proc"}, argv...)
	}
	p := &initProc{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan error, 1), eof: make(chan struct{})}
	p.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	p.cmd.Dir = "/"
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 5 * time.Second // a straggler outliving init would hold stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	// A pipe of our own rather than StdoutPipe: init's exit and the end of
	// its output are separate events when a straggler outlives init.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = w
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	go func() {
		defer close(p.eof)
		defer out.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
	}()
	p.pid = p.cmd.Process.Pid
	if pid1 {
		waitFor(t, func() bool { p.pid = childOf(p.cmd.Process.Pid); return p.pid > 0 })
	}
	t.Cleanup(func() {
		// A subreaper's command outlives it (re-parented above): a test that
		// failed midway must not leave its process tree running. As PID 1,
		// init's death ends its namespace.
		for _, pid := range descendantsOf(p.pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		syscall.Kill(p.pid, syscall.SIGKILL)
		p.cmd.Process.Kill()
	})
	return p
}

// descendantsOf lists every process below pid, stopping them first
// (SIGSTOP) so that none forks while the tree is walked.
func descendantsOf(pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for grew := true; grew; {
		grew = false
		for _, s := range procStats() {
			if seen[s.ppid] && !seen[s.pid] {
				seen[s.pid], grew = true, true
				syscall.Kill(s.pid, syscall.SIGSTOP)
				out = append(out, s.pid)
			}
		}
	}
	return out
}

// waitLine waits for a line of stdout starting with prefix and returns it.
func (p *initProc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	var line string
	waitFor(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			if strings.HasPrefix(l, prefix) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func (p *initProc) hasLine(line string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l == line {
			return true
		}
	}
	return false
}

func (p *initProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// wait waits up to a minute for init to exit and returns its exit code
// and stderr; then for the end of its output, which a process still
// holding stdout would delay forever: that is reported.
func (p *initProc) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("init: %v\n%s", err, p.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("init did not exit within a minute; output %q", p.output())
	}
	select {
	case <-p.eof:
	case <-time.After(10 * time.Second):
		t.Errorf("init exited but something it started still holds its stdout; output %q", p.output())
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// childOf returns a child of pid, or 0.
func childOf(pid int) int {
	for _, s := range procStats() {
		if s.ppid == pid {
			return s.pid
		}
	}
	return 0
}

// zombieChildren counts the zombie children of pid.
func zombieChildren(pid int) int {
	n := 0
	for _, s := range procStats() {
		if s.ppid == pid && s.state == "Z" {
			n++
		}
	}
	return n
}

type procStat struct {
	pid, ppid int
	state     string
}

func procStats() []procStat {
	var out []procStat
	files, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(data)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		var st procStat
		fmt.Sscanf(s[:end], "%d", &st.pid)
		fmt.Sscanf(s[end+2:], "%s %d", &st.state, &st.ppid)
		out = append(out, st)
	}
	return out
}

// openPTY returns a new pseudo-terminal pair (pty(7)).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestInitKeepsIgnoredSignalsIgnored: signals ignored when init started
// (nohup; a shell's `cmd &` ignores SIGINT and SIGQUIT) stay ignored for
// the command, which a SIGUSR1 sent to init (and forwarded, as tini does)
// then leaves running. The Go runtime alone keeps an inherited SIG_IGN
// only for SIGHUP and SIGINT: the others came to the command as default,
// and SIGUSR1 to init killed it (exit 138).
func TestInitKeepsIgnoredSignalsIgnored(t *testing.T) {
	t.Parallel()
	ignoring := func(script string) *exec.Cmd {
		cmd := exec.Command("env", "--ignore-signal=USR1", "--ignore-signal=QUIT", agentjail, "init", "--", "sh", "-c", script)
		cmd.Env, cmd.Dir = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, "/"
		return cmd
	}
	out, err := ignoring("grep SigIgn /proc/self/status").Output()
	var mask uint64
	if _, serr := fmt.Sscanf(strings.TrimSpace(string(out)), "SigIgn:\t%x", &mask); err != nil || serr != nil {
		t.Fatalf("%v %v: %q", err, serr, out)
	}
	if want := uint64(1<<(syscall.SIGUSR1-1) | 1<<(syscall.SIGQUIT-1)); mask&want != want || mask&(1<<(syscall.SIGTERM-1)) != 0 {
		t.Errorf("the command's ignored signals %#x, want SIGUSR1 and SIGQUIT (%#x) and not SIGTERM", mask, want)
	}
	cmd := ignoring("echo ready; sleep 1; echo done")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if l, _ := r.ReadString('\n'); l != "ready\n" {
		t.Fatalf("first line %q", l)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGUSR1) // env has exec'd init
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil || string(rest) != "done\n" {
		t.Errorf("SIGUSR1 to init: %v, the command said %q after it, want it to go on", err, rest)
	}
}

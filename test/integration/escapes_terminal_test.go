package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/term"
)

// TestEscapeTerminal (issue 14, item 5): an agent whose stdin is the
// operator's terminal can leave it without echo and raw (`stty -echo
// raw`), change its line discipline (TIOCSETD, a way into kernel code),
// and end its output with "\e[8m", which hides everything printed after
// it. Under plain bwrap the modes stay changed and TIOCSETD works. Under
// agentjail, on every way a run ends that agentjail controls (the command
// ends, a timeout, `agentjail stop`, SIGTERM, SIGINT or SIGHUP to agentjail), the
// terminal's modes are those it had before the run, TIOCSETD fails with
// EPERM, and agentjail's own messages are preceded by a reset of the
// character attributes. The terminal is a pty that agentjail (or bwrap)
// has as its controlling terminal and as stdin, stdout and stderr, as
// from a shell; the agent has a terminal of its own (the default there),
// or, with --no-tty, the operator's as its stdin.
func TestEscapeTerminal(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	// The agent: modes, line discipline, concealed text; then, for the
	// runs that agentjail ends, its run id and a wait.
	agent := func(then string) string {
		return fmt.Sprintf(`stty -echo raw; %s tiocsetd-fd0; printf '\033[8m'; %s`, e.probe, then)
	}

	c := onTerminal(t, []string{"bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--unshare-pid", "--die-with-parent", "--new-session", "--", "sh", "-c", agent("true")}, nil)
	holeShown(t, c.after.Lflag&unix.ECHO == 0 && strings.Contains(c.out, "tiocsetd-fd0=ok"),
		"the terminal is left without echo and TIOCSETD works", result{stdout: c.out, code: c.code})

	runID := regexp.MustCompile(`id=([a-z0-9]+)\b`)
	p := workspace(t)
	for _, c := range []struct {
		name string
		args []string
		then string
		end  func(t *testing.T, pid int, out *lockedBuffer)
		code int
	}{
		// A set-group-id bit, stripped after the run: agentjail then
		// prints a violation line after the agent's "\e[8m".
		{"the command ends", []string{"--write", p, "--chdir", p}, "touch f; chmod g+s f", nil, 123},
		{"timeout", []string{"--timeout", "2s"}, "echo ready; sleep 60", nil, 124},
		{"agentjail stop", nil, `echo id=$AGENTJAIL_RUN; sleep 60`, func(t *testing.T, _ int, out *lockedBuffer) {
			waitFor(t, func() bool { return runID.MatchString(out.String()) })
			wantCode(t, aj(t, "stop", runID.FindStringSubmatch(out.String())[1]), 0)
		}, 124},
		{"SIGTERM", nil, "echo ready; sleep 60", signalWhenReady(syscall.SIGTERM), 128 + 15},
		{"SIGINT", nil, "echo ready; sleep 60", signalWhenReady(syscall.SIGINT), 128 + 2},
		{"SIGHUP", nil, "echo ready; sleep 60", signalWhenReady(syscall.SIGHUP), 128 + 1},
	} {
		for _, mode := range []string{"--tty", "--no-tty"} {
			t.Run(c.name+" "+mode, func(t *testing.T) {
				t.Parallel()
				argv := append(append([]string{agentjail, "run", "--profile", "tier1", mode}, c.args...), "--", "sh", "-c", agent(c.then))
				r := onTerminal(t, argv, c.end)
				if r.code != c.code {
					t.Errorf("exit %d, want %d; the terminal showed:\n%q", r.code, c.code, r.out)
				}
				if r.after != r.before {
					t.Errorf("the terminal's modes after the run:\n%+v\nbefore:\n%+v", r.after, r.before)
				}
				if !strings.Contains(r.out, "tiocsetd-fd0=EPERM") {
					t.Errorf("TIOCSETD not refused; the terminal showed:\n%q", r.out)
				}
				// Every message of agentjail's after the agent's "\e[8m"
				// comes after a reset.
				hidden := strings.LastIndex(r.out, "\x1b[8m")
				if hidden < 0 {
					t.Fatalf("the agent's \\e[8m did not reach the terminal:\n%q", r.out)
				}
				// Every run here ends with a line of agentjail's saying
				// what ended it (a violation is said above it too).
				rest := r.out[hidden:]
				msg := strings.Index(rest, "agentjail: ")
				if c.name == "the command ends" && !strings.Contains(rest, "agentjail: violation: ") ||
					!strings.Contains(rest, "agentjail: the run ended: ") {
					t.Errorf("no line of agentjail's after the run:\n%q", rest)
				}
				if msg < 0 || !strings.Contains(rest[:msg], term.Reset) {
					t.Errorf("agentjail spoke without resetting the attributes first:\n%q", rest)
				}
			})
		}
	}
}

func signalWhenReady(sig syscall.Signal) func(t *testing.T, pid int, out *lockedBuffer) {
	return func(t *testing.T, pid int, out *lockedBuffer) {
		waitFor(t, func() bool { return strings.Contains(out.String(), "ready") })
		syscall.Kill(pid, sig)
	}
}

// terminalRun is a command run on a terminal of its own.
type terminalRun struct {
	before, after unix.Termios
	out           string // everything the terminal showed
	code          int
}

// onTerminal runs argv as the leader of a new session whose controlling
// terminal is a new pty, which is also its stdin, stdout and stderr; end,
// when set, is called once it has started. It returns the terminal's
// modes before and after, and what it showed.
func onTerminal(t *testing.T, argv []string, end func(t *testing.T, pid int, out *lockedBuffer)) terminalRun {
	t.Helper()
	master, tty := openPTY(t)
	defer tty.Close()
	modes := func() unix.Termios {
		m, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return *m
	}
	r := terminalRun{before: modes()}
	var out lockedBuffer
	drained := make(chan struct{})
	go func() {
		io.Copy(&out, master) // until EIO: every holder of the tty has closed it
		close(drained)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if end != nil {
		end(t, cmd.Process.Pid, &out)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%q did not finish in a minute; the terminal showed:\n%q", argv, out.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.after = modes()
	tty.Close()
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
		t.Fatalf("the terminal is still held open after %q ended", argv)
	}
	r.out = out.String()
	return r
}

// TestEscapeTerminalStdin: in a run with pipes (--no-tty, or agentjail's
// stdout not a terminal), the jail's stdin was the operator's terminal, and
// a shell's terminal is open for reading and writing: under plain bwrap the
// agent writes a clipboard string (OSC 52) to it through fd 0, past any
// filter on stdout and stderr. Under agentjail the jail's stdin is a pty of
// its own, fed with what is typed: the write reaches no one, and the agent
// still reads what is typed, and still sees a terminal on 0.
func TestEscapeTerminalStdin(t *testing.T) {
	jailed(t)
	const attack = `printf '\033]52;c;RVNDQVBF\007' >&0; echo wrote=$?; test -t 0 && echo stdin-is-a-terminal; read line; echo "read=$line"`
	c := atTerminal(t, 24, 80, "bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--unshare-pid", "--die-with-parent", "--new-session", "--", "sh", "-c", attack)
	c.waitShown(t, "stdin-is-a-terminal")
	c.typed(t, "typed\r")
	_, out := c.wait(t)
	holeShown(t, strings.Contains(out, "52;c;RVNDQVBF"), "the agent writes OSC 52 to the operator's terminal through its stdin", result{stdout: out})

	o := atTerminal(t, 24, 80, agentjail, "run", "--no-tty", "--", "sh", "-c", attack)
	o.waitShown(t, "stdin-is-a-terminal")
	o.typed(t, "typed\r")
	code, out := o.wait(t)
	if code != 0 || strings.Contains(out, "52;c;RVNDQVBF") || !strings.Contains(out, "read=typed") {
		t.Errorf("exit %d; the terminal showed %q", code, out)
	}
}

// TestEscapeTerminalStdinInTheBackground: a run with pipes started in the
// background of the operator's shell (&), or stopped there (^Z): read from
// a new session, the terminal is outside its job control, so under plain
// bwrap the jail goes on reading it, and takes what the operator types to
// their own shell (a password for sudo...). Under agentjail the jail reads
// what is typed only while the run's job is the terminal's foreground: the
// shell gets every line, the jail none, and the run is not stopped (its
// limits still hold).
func TestEscapeTerminalStdinInTheBackground(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	run := func(t *testing.T, prefix, name string) (string, string) {
		stolen := filepath.Join(ws, name)
		o := atTerminalEnv(t, 24, 200, []string{"PS1=OP$ ", "HOME=/"}, "bash", "--norc", "--noprofile", "-i")
		o.waitShown(t, "OP$ ")
		o.typed(t, fmt.Sprintf("%s sh -c 'echo started > %[2]s.started; dd bs=1 count=5 of=%[2]s 2>/dev/null' >/dev/null 2>%[2]s.err &\r", prefix, stolen))
		time.Sleep(time.Second) // the run has started (no timing is asserted: an early line is the shell's either way)
		for i := range 3 {
			o.typed(t, fmt.Sprintf("echo typed-at-my-own-shell-%d\r", i))
			time.Sleep(700 * time.Millisecond) // for whoever reads it (no timing is asserted)
		}
		o.typed(t, "wait; exit\r")
		_, out := o.wait(t)
		if !fileExists(stolen + ".started") {
			errs, _ := os.ReadFile(stolen + ".err")
			t.Fatalf("the jail did not start:\n%s\n%q", errs, out)
		}
		data, _ := os.ReadFile(stolen)
		return string(data), out
	}
	stolen, out := run(t, "bwrap --ro-bind / / --bind "+ws+" "+ws+" --dev /dev --new-session --die-with-parent --", "plain")
	// bash's readline reads a key at a time: the jail and the shell
	// share them.
	holeShown(t, stolen != "", "the background jail reads what the operator types to their shell", result{stdout: stolen + "\n" + out})

	// Directly, and through the launcher, whose worker is outside the
	// terminal's session: no SIGTTIN would stop its reads there.
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	t.Cleanup(startLauncher(t, sock).stop)
	args := " --no-tty --timeout 5s --user " + strconv.Itoa(runUID) + " --write " + ws + " --"
	for name, prefix := range map[string]string{"agentjail": agentjail + " run" + args, "launcher": "AGENTJAIL_LAUNCHER=" + sock + " " + clientBin() + args} {
		stolen, out = run(t, prefix, name)
		if stolen != "" {
			t.Errorf("%s: the jail read %q, typed to the operator's shell:\n%q", name, stolen, out)
		}
		for i := range 3 {
			if !strings.Contains(out, fmt.Sprintf("\rtyped-at-my-own-shell-%d\r\n", i)) {
				t.Errorf("%s: the operator's shell did not run its line %d:\n%q", name, i, out)
			}
		}
	}
}

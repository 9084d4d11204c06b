package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/term"
)

// operator is agentjail run from a shell at a terminal: the leader of a
// new session whose controlling terminal, stdin, stdout and stderr are a
// pty the test holds; the test types on its master and reads what the
// terminal shows there.
type operator struct {
	master, tty *os.File
	cmd         *exec.Cmd
	shown       lockedBuffer
	drained     chan struct{}
	exited      chan struct{}
	// before and after are the terminal's modes before agentjail started
	// and once it has ended.
	before, after unix.Termios
	code          int
}

// atTerminal starts argv (agentjail, or what runs it) on a new terminal
// of rows x cols.
func atTerminal(t *testing.T, rows, cols int, argv ...string) *operator {
	t.Helper()
	return atTerminalEnv(t, rows, cols, nil, argv...)
}

// atTerminalEnv is atTerminal with env added to the environment.
func atTerminalEnv(t *testing.T, rows, cols int, env []string, argv ...string) *operator {
	t.Helper()
	master, tty := openPTY(t)
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	o := &operator{master: master, tty: tty, drained: make(chan struct{}), exited: make(chan struct{})}
	o.before = o.modes(t)
	go func() {
		io.Copy(&o.shown, master) // until EIO: every holder of the terminal has closed it
		close(o.drained)
	}()
	o.cmd = exec.Command(argv[0], argv[1:]...)
	o.cmd.Dir = "/"
	o.cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}, env...)
	o.cmd.Stdin, o.cmd.Stdout, o.cmd.Stderr = tty, tty, tty
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		o.cmd.Wait()
		o.code = o.cmd.ProcessState.ExitCode()
		close(o.exited)
	}()
	t.Cleanup(func() {
		o.cmd.Process.Kill()
		<-o.exited
	})
	return o
}

func (o *operator) modes(t *testing.T) unix.Termios {
	t.Helper()
	m, err := unix.IoctlGetTermios(int(o.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return *m
}

// typed writes s on the terminal, as keys typed.
func (o *operator) typed(t *testing.T, s string) {
	t.Helper()
	if _, err := o.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitShown waits until the terminal has shown s (after the first from
// bytes), and returns where it ends.
func (o *operator) waitShown(t *testing.T, s string) int {
	t.Helper()
	var end int
	waitFor(t, func() bool {
		i := strings.Index(o.shown.String(), s)
		end = i + len(s)
		select {
		case <-o.exited:
			if i < 0 {
				t.Fatalf("agentjail ended (exit %d) before the terminal showed %q:\n%q", o.code, s, o.shown.String())
			}
		default:
		}
		return i >= 0
	})
	return end
}

// wait waits for agentjail to end and for the terminal's last holder to
// let go of it, and returns the exit code and all the terminal showed.
func (o *operator) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-o.exited:
	case <-time.After(time.Minute):
		t.Fatalf("agentjail did not finish in a minute; the terminal showed:\n%q", o.shown.String())
	}
	o.after = o.modes(t)
	if n, err := unix.IoctlGetInt(int(o.tty.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Errorf("%d bytes left unread in the terminal's input (%v)", n, err)
	}
	o.tty.Close()
	select {
	case <-o.drained:
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal is still held open after agentjail ended")
	}
	out := o.shown.String()
	if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
		t.Errorf("agentjail panicked:\n%s", out)
	}
	return o.code, out
}

// TestInteractiveTerminal: at a terminal the agent gets one of its own, in
// the jail's devpts: a terminal on 0, 1 and 2, named /dev/pts/0, of the
// operator's size, resized with it (SIGWINCH), reading what is typed. The
// record says io pty, with the size and the input.
func TestInteractiveTerminal(t *testing.T) {
	jailed(t)
	rec := recordPath(t)
	o := atTerminal(t, 30, 90, agentjail, "run", "--record", rec, "--", "bash", "--norc", "-c",
		`test -t 0 && test -t 1 && test -t 2 && echo "terminal on 0 1 2"; tty; echo "size $(stty size)"; ls /dev/pts | tr '\n' ' '; echo
trap 'echo "resized to $(stty size)"' WINCH; echo ready; sleep 30 & wait $!; read -r line; echo "got:$line"`)
	o.waitShown(t, "ready")
	if err := unix.IoctlSetWinsize(int(o.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 100}); err != nil {
		t.Fatal(err)
	}
	// agentjail learns of the new size from SIGWINCH, which the kernel
	// sends the terminal's foreground process group: agentjail's.
	o.waitShown(t, "resized to 50 100")
	o.typed(t, "hello\r")
	code, out := o.wait(t)
	for _, want := range []string{"terminal on 0 1 2\r\n", "/dev/pts/0\r\n", "size 30 90\r\n", "0 ptmx \r\n", "got:hello\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	r := readRecord(t, rec, code)
	if r.IO != "pty" || r.Terminal == nil || r.Terminal.Rows != 30 || r.Terminal.Cols != 90 || r.Terminal.Resizes != 1 || r.Terminal.InputBytes != 6 {
		t.Errorf("record: io %q, terminal %+v", r.IO, r.Terminal)
	}
	if !strings.Contains(r.Excerpt.Stdout.Head, "got:hello\r\n") {
		t.Errorf("the record's stdout excerpt: %q", r.Excerpt.Stdout.Head)
	}
	if o.after != o.before {
		t.Errorf("the terminal's modes changed:\n%+v\nbefore:\n%+v", o.after, o.before)
	}
}

// TestInteractiveControlKeys: ^C and ^\ reach the agent through its
// terminal's line discipline (agentjail's own terminal is raw): death by
// SIGINT is 130, by SIGQUIT 131, as in a shell; ^D ends a read.
func TestInteractiveControlKeys(t *testing.T) {
	jailed(t)
	for _, c := range []struct {
		key  string
		code int
	}{{"\x03", 130}, {"\x1c", 131}} {
		o := atTerminal(t, 24, 80, agentjail, "run", "--", "sh", "-c", "echo ready; exec sleep 100")
		o.waitShown(t, "ready")
		o.typed(t, c.key)
		if code, out := o.wait(t); code != c.code {
			t.Errorf("%q: exit %d, want %d; the terminal showed %q", c.key, code, c.code, out)
		}
	}
	o := atTerminal(t, 24, 80, agentjail, "run", "--", "sh", "-c", `echo ready; cat; echo "cat ended"`)
	o.waitShown(t, "ready")
	o.typed(t, "x\r\x04")
	if code, out := o.wait(t); code != 0 || !strings.Contains(out, "cat ended") {
		t.Errorf("^D: exit %d; the terminal showed %q", code, out)
	}
}

// TestInteractiveEndsTheWholeAgent: an agent that ignores SIGTERM, on its
// terminal, with a foreground job in a process group of its own (an
// interactive shell's), is still ended by a timeout, `agentjail stop` and
// SIGTERM to agentjail: SIGTERM reaches the agent's session and the
// foreground job, and after the grace SIGKILL ends the jail's pid
// namespace. SIGTERM also reaches, within the grace, a background job in a
// third process group and a process in a session of its own (setsid),
// which trap it. Nothing of the run is left.
func TestInteractiveEndsTheWholeAgent(t *testing.T) {
	jailed(t)
	runID := regexp.MustCompile(`id=([a-z0-9]+)\b`)
	for _, c := range []struct {
		name string
		args []string
		end  func(t *testing.T, o *operator)
		code int
	}{
		{"timeout", []string{"--timeout", "6s"}, nil, 124},
		{"agentjail stop", nil, func(t *testing.T, o *operator) {
			wantCode(t, aj(t, "stop", runID.FindStringSubmatch(o.shown.String())[1]), 0)
		}, 124},
		{"SIGTERM", nil, func(t *testing.T, o *operator) { o.cmd.Process.Signal(syscall.SIGTERM) }, 128 + 15},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := workspace(t)
			rec := recordPath(t)
			tok := token()
			args := append([]string{"run", "--grace", "2s", "--write", ws, "--chdir", ws, "--record", rec}, c.args...)
			// bash -i takes no SIGTERM; its job, in a group of its own,
			// ignores it too (trap '' is inherited). The two started
			// before that trap take it and say so.
			o := atTerminal(t, 24, 80, append(append([]string{agentjail}, args...), "--", "bash", "--norc", "--noprofile", "-i")...)
			trapping := func(name string) string {
				return fmt.Sprintf(`sh -c 'trap "touch %[1]s-got-term; exit 0" TERM; touch %[1]s-up; while :; do sleep 0.1; done'`, name)
			}
			o.typed(t, fmt.Sprintf("echo id=$AGENTJAIL_RUN; setsid %s & %s & trap '' TERM; sleep %s\r", trapping("setsid"), trapping("job"), tok))
			waitFor(t, func() bool { return runID.MatchString(o.shown.String()) }) // not the echo of $AGENTJAIL_RUN
			waitFor(t, func() bool {
				return len(procsWith(tok)) == 1 && fileExists(filepath.Join(ws, "setsid-up")) && fileExists(filepath.Join(ws, "job-up"))
			})
			if c.end != nil {
				c.end(t, o)
			}
			code, out := o.wait(t)
			if code != c.code {
				t.Errorf("exit %d, want %d; the terminal showed %q", code, c.code, out)
			}
			r := readRecord(t, rec, code)
			var targets []string
			for _, s := range r.SignalsSent {
				targets = append(targets, s.Signal+">"+s.Target)
			}
			for _, want := range []string{"SIGTERM>session", "SIGTERM>foreground", "SIGTERM>others", "SIGKILL>group"} {
				if !slices.Contains(targets, want) {
					t.Errorf("signals sent %v lack %s", targets, want)
				}
			}
			for _, name := range []string{"setsid", "job"} {
				if !fileExists(filepath.Join(ws, name+"-got-term")) {
					t.Errorf("the %s process got no SIGTERM; signals sent %v", name, targets)
				}
			}
			if left := procsWith(tok); len(left) > 0 {
				t.Errorf("left running: %v", left)
			}
			if o.after != o.before {
				t.Error("the terminal's modes changed")
			}
		})
	}
}

// TestInteractiveRestoresTheTerminal: whatever the agent did to its
// terminal and to the screen (raw mode without echo, the alternate screen,
// the cursor hidden, mouse reporting, bracketed paste, concealed text),
// the operator's terminal has its modes back, and its screen state reset,
// before agentjail's own messages: after a normal end, a timeout, and
// SIGTERM and SIGHUP to agentjail. An agent that never entered the alternate screen
// gets no "leave it" (it would move the cursor).
func TestInteractiveRestoresTheTerminal(t *testing.T) {
	jailed(t)
	messy := `stty raw -echo; printf '\033[?1049h\033[?25l\033[?1000h\033[?2004h\033[8m'; echo ready; `
	for _, c := range []struct {
		name, script string
		args         []string
		end          func(o *operator)
		code         int
		altScreen    bool
	}{
		{"normal end", messy + "exit 3", nil, nil, 3, true},
		{"timeout", messy + "sleep 60", []string{"--timeout", "3s"}, nil, 124, true},
		{"SIGTERM", messy + "sleep 60", nil, func(o *operator) { o.cmd.Process.Signal(syscall.SIGTERM) }, 143, true},
		{"SIGHUP", messy + "sleep 60", nil, func(o *operator) { o.cmd.Process.Signal(syscall.SIGHUP) }, 129, true},
		{"no alternate screen", `printf '\033[?25l\033[8m'; echo ready; exit 3`, nil, nil, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"run", "--grace", "1s"}, c.args...), "--", "sh", "-c", c.script)
			o := atTerminal(t, 24, 80, append([]string{agentjail}, args...)...)
			from := o.waitShown(t, "ready")
			if c.end != nil {
				c.end(o)
			}
			code, out := o.wait(t)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			after := o.after
			if after != o.before || after.Lflag&unix.ECHO == 0 || after.Lflag&unix.ICANON == 0 {
				t.Errorf("the terminal's modes after the run:\n%+v\nbefore:\n%+v", after, o.before)
			}
			rest := out[from:]
			// agentjail's first message after the run (its warning ahead
			// of the limit is during the run).
			upTo := -1
			for i := 0; i < len(rest); {
				j := strings.Index(rest[i:], "agentjail: ")
				if j < 0 {
					break
				}
				if !strings.HasPrefix(rest[i+j:], "agentjail: warning: the wall limit") {
					upTo = i + j
					break
				}
				i += j + 1
			}
			if upTo < 0 {
				if c.code != 3 {
					t.Fatalf("agentjail did not say why the run ended:\n%q", rest)
				}
				upTo = len(rest)
			}
			reset := rest[:upTo]
			for _, want := range []string{"\x1b[?25h", "\x1b[?1000l", "\x1b[?2004l", "\x1b[0m"} {
				if !strings.Contains(reset, want) {
					t.Errorf("no %q before agentjail's message:\n%q", want, rest)
				}
			}
			if got := strings.Contains(reset, "\x1b[?1049l"); got != c.altScreen {
				t.Errorf("alternate screen left: %v, want %v:\n%q", got, c.altScreen, rest)
			}
		})
	}
}

// TestInteractiveRestoresTheTerminalWhenBwrapFails: bubblewrap failing to
// set the jail up (a bind source missing) ends the run (exit 125) with the
// operator's terminal's modes exactly as they were: raw for a run with a
// pty of its own, and, with --no-tty, changed by what the jail's stdin
// reached (here the failing bwrap itself, `stty raw -echo` from
// agentjail's session, where it is a background job: SIGTTOU ignored).
func TestInteractiveRestoresTheTerminalWhenBwrapFails(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{
		"failing-bwrap": "#!/bin/sh\n[ \"$1\" = --version ] && exec bwrap --version\ntrap '' TTOU\nstty raw -echo 2>/dev/null\nexec bwrap --ro-bind /nonexistent/agentjail-src /mnt \"$@\"\n",
	})
	os.Chmod(filepath.Join(dir, "failing-bwrap"), 0o755)
	for _, mode := range []string{"--tty", "--no-tty"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			o := atTerminalEnv(t, 24, 80, []string{"AGENTJAIL_BWRAP=" + filepath.Join(dir, "failing-bwrap")}, agentjail, "run", mode, "--", "true")
			code, out := o.wait(t)
			if code != 125 || !strings.Contains(out, "bubblewrap could not set up the jail") {
				t.Errorf("exit %d; the terminal showed %q", code, out)
			}
			if o.after != o.before {
				t.Errorf("the terminal's modes after the run:\n%+v\nbefore:\n%+v", o.after, o.before)
			}
		})
	}
}

// TestInteractiveKeepsControlStringsOff: the agent's clipboard writes and
// reads (OSC 52, in 7 bits, as UTF-8 C1, in tmux's passthrough, one byte
// per write) never reach the operator's terminal; with --allow-clipboard
// a write does. The record counts what was dropped.
func TestInteractiveKeepsControlStringsOff(t *testing.T) {
	jailed(t)
	// One byte per write: printf each octal escape on its own.
	oneByOne := `s=$(printf '\033]52;c;QUJD\007' | od -An -v -to1 | tr -s ' \n' '  '); for b in $s; do printf "\\$b"; done`
	script := `printf '\033]52;c;QUJD\007'; printf '\033]52;c;?\007'; printf '\033Ptmux;\033\033]52;c;QUJD\007\033\\';
printf '\302\23552;c;QUJD\302\234'; ` + oneByOne + `; printf '\033]0;a title\007'; echo done
printf '\033\033]0\033\\]52;c;RVZJTA\007\033\007]52;c;RVZJTA\007\033\177]52;c;RVZJTA\007'`
	for _, allow := range []bool{false, true} {
		rec := recordPath(t)
		args := []string{"run", "--record", rec}
		if allow {
			args = append(args, "--allow-clipboard")
		}
		o := atTerminal(t, 24, 80, append(append([]string{agentjail}, args...), "--", "sh", "-c", script)...)
		code, out := o.wait(t)
		if code != 0 || !strings.Contains(out, "done") || !strings.Contains(out, "\x1b]0;a title\x07") {
			t.Fatalf("exit %d; the terminal showed %q", code, out)
		}
		r := readRecord(t, rec, code)
		if n := strings.Count(out, "52;") - strings.Count(out, "52;c;RVZJTA"); allow && n != 3 || !allow && n != 0 {
			// Allowed: the plain write, the C1 one and the one written
			// byte by byte; never the read, nor tmux's passthrough.
			t.Errorf("allow %v: %d clipboard strings reached the terminal:\n%q", allow, n, out)
		}
		if allow != strings.Contains(out, "QUJD") || r.Terminal == nil || r.Terminal.ClipboardAllowed != allow || r.Terminal.StringsDropped == 0 {
			t.Errorf("allow %v: the terminal showed %q; record %+v", allow, out, r.Terminal)
		}
		// An ESC the filter passed alone, which a terminal still waits
		// on after a BEL (executed) or a DEL (ignored), would make the
		// plain text after it a clipboard write.
		if shown := strings.Map(func(r rune) rune {
			if r < 0x20 && r != 0x1b || r == 0x7f {
				return -1
			}
			return r
		}, out); !allow && strings.Contains(shown, "\x1b]52;c;RVZJTA") {
			t.Errorf("allow %v: a lone ESC made plain text a clipboard write:\n%q", allow, out)
		}
		if !strings.Contains(r.Excerpt.Stdout.Head, "\x1b]52;c;QUJD") {
			t.Errorf("the record does not hold what the agent wrote: %q", r.Excerpt.Stdout.Head)
		}
	}
}

// TestInteractiveTIOCSTI: the operator's terminal never enters the jail,
// so typing into a terminal with TIOCSTI reaches the agent's own at most;
// under tier1 the filter refuses it anyway. Either way nothing is waiting
// in the operator's terminal's input after the run.
func TestInteractiveTIOCSTI(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	for _, c := range []struct {
		profile, want string
	}{{"tier1", "inject=EPERM"}, {e.control, "inject=ok"}} {
		rec := recordPath(t)
		o := atTerminal(t, 24, 80, agentjail, "run", "--record", rec, "--profile", c.profile, "--", e.probe, "inject")
		code, out := o.wait(t) // and nothing left in the terminal's input
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d; the terminal showed %q, want %s", c.profile, code, out, c.want)
		}
		// What reached the operator's terminal's input, agentjail read.
		if r := readRecord(t, rec, code); r.Terminal == nil || r.Terminal.InputBytes != 0 {
			t.Errorf("%s: input from the operator's terminal: %+v", c.profile, r.Terminal)
		}
	}
}

// TestInteractiveEscape: ~. typed after Enter ends the run as `agentjail
// stop` does (exit 124), ~? lists the escapes, ~~ types one ~.
func TestInteractiveEscape(t *testing.T) {
	jailed(t)
	rec := recordPath(t)
	o := atTerminal(t, 24, 80, agentjail, "run", "--record", rec, "--", "sh", "-c", `echo ready; while read -r l; do echo "got:$l"; done`)
	o.waitShown(t, "ready")
	o.typed(t, "~~x\r")
	o.waitShown(t, "got:~x")
	o.typed(t, "~?")
	o.waitShown(t, "~.  end the run")
	o.typed(t, "~.")
	code, out := o.wait(t)
	r := readRecord(t, rec, code)
	if code != 124 || r.Reason != "stopped" || r.Terminal == nil || !r.Terminal.EndedByEscape || !strings.Contains(out, "agentjail: the run ended: ended by the operator's ~. (exit 124)") {
		t.Errorf("exit %d, reason %s, terminal %+v; the terminal showed %q", code, r.Reason, r.Terminal, out)
	}
}

// TestInteractiveLimits: a run at a terminal takes limits.interactive, not
// the tier's limits for unattended runs, and typing keeps it alive; a
// warning comes on the terminal before the idle limit ends it.
func TestInteractiveLimits(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"p.yaml": "extends: tier1\nlimits:\n  idle: 1s\n  wall: 2s\n  interactive: {idle: 4s, wall: 0}\n"})
	rec := recordPath(t)
	o := atTerminal(t, 24, 80, agentjail, "run", "--profile", dir+"/p.yaml", "--grace", "1s", "--record", rec, "--", "sh", "-c", `stty -echo; echo ready; sleep 60`)
	o.waitShown(t, "ready")
	// Keys alone, a second apart: the agent's terminal does not echo
	// them, so the agent prints nothing; each is activity. Without
	// typing counting, the idle limit would end the run 4 s after ready.
	for range 6 {
		time.Sleep(time.Second)
		o.typed(t, "a")
	}
	select {
	case <-o.exited:
		t.Fatalf("typing did not keep the run alive:\n%q", o.shown.String())
	default:
	}
	o.waitShown(t, "agentjail: warning: nothing printed or typed")
	code, out := o.wait(t)
	r := readRecord(t, rec, code)
	if code != 124 || r.Reason != "idle_timeout" || r.Limits.IdleMS != 4000 || r.Limits.WallMS != 0 {
		t.Errorf("exit %d, reason %s, limits %+v; the terminal showed %q", code, r.Reason, r.Limits, out)
	}
}

// TestTTYWithAPipe: --tty with a stdin that is no terminal (a script whose
// tool wants a terminal) passes its end on, as script(1) does, a line left
// unfinished included, and keeps the profile's own limits: no one types
// at it. It hung until the interactive idle limit (30 minutes).
func TestTTYWithAPipe(t *testing.T) {
	jailed(t)
	for _, c := range []struct{ name, stdin, want string }{
		{"nothing", "", "read=[]\ngot-eof\n"},
		{"a line", "one\n", "read=[one]\ngot-eof\n"},
		{"a line left unfinished", "part", "read=[part]\ngot-eof\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := recordPath(t)
			r := invocation{stdin: c.stdin}.run(t, "run", "--tty", "--record", rec, "--", "sh", "-c", `echo "read=[$(cat)]"; echo got-eof`)
			wantCode(t, r, 0)
			// What the agent's terminal echoes of the input comes first.
			if got := strings.ReplaceAll(r.stdout, "\r", ""); !strings.HasSuffix(got, c.want) {
				t.Errorf("stdout %q, want %q", got, c.want)
			}
			if l := readRecord(t, rec, 0).Limits; l.WallMS != 600000 || l.IdleMS != 120000 {
				t.Errorf("limits %+v, want tier1's own (10m, 2m)", l)
			}
		})
	}
}

// TestPipesEndOfFileAfterPart: with the operator's terminal on stdin and
// stdout a pipe, `part` then ^D ^D ends the agent's input as it ends
// cat's at the terminal itself: the terminal passes `part` on without the
// first ^D, which the jail's own terminal needs too (a third was needed).
func TestPipesEndOfFileAfterPart(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	o := atTerminalEnv(t, 24, 200, []string{"PS1=OP$ ", "HOME=/"}, "bash", "--norc", "--noprofile", "-i")
	o.waitShown(t, "OP$ ")
	o.typed(t, fmt.Sprintf("%s run --user %d --write %s --chdir %s -- sh -c 'cat; echo EOF-seen' | cat\r", agentjail, runUID, ws, ws))
	agentjailUnder(t, o.cmd.Process.Pid)
	o.typed(t, "part\x04\x04")
	o.waitShown(t, "EOF-seen")
	waitFor(t, func() bool { return len(childrenOf(o.cmd.Process.Pid)) == 0 }) // what is typed is the shell's again
	o.typed(t, "exit\r")
	o.wait(t)
}

// TestInteractiveWallWarning: the wall limit a run at a terminal takes
// (limits.interactive's, not the tier's) is announced on the terminal, on
// a line of its own, while the run goes on: a quarter of the limit ahead
// (a minute for limits of 4 minutes and more).
func TestInteractiveWallWarning(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"p.yaml": "extends: tier1\nlimits:\n  wall: 2s\n  interactive: {wall: 4s, idle: 0}\n"})
	rec := recordPath(t)
	// Deaf to SIGTERM: the run ends after the grace, well after the
	// warning.
	o := atTerminal(t, 24, 80, agentjail, "run", "--profile", dir+"/p.yaml", "--grace", "3s", "--record", rec, "--", "sh", "-c", `trap '' TERM; echo ready; sleep 60`)
	o.waitShown(t, "ready")
	warning := "\r\n" + term.Reset + "agentjail: warning: the wall limit (4s) ends this run in 1s\r\n"
	o.waitShown(t, warning)
	select {
	case <-o.exited:
		t.Fatalf("the warning came after the run ended:\n%q", o.shown.String())
	default:
	}
	code, out := o.wait(t)
	r := readRecord(t, rec, code)
	if code != 124 || r.Reason != "wall_timeout" || r.Limits.WallMS != 4000 {
		t.Errorf("exit %d, reason %s, limits %+v; the terminal showed %q", code, r.Reason, r.Limits, out)
	}
	if w, end := strings.Index(out, warning), strings.Index(out, "agentjail: the run ended: wall limit 4s reached"); end < 0 || w > end {
		t.Errorf("no warning before the end:\n%q", out)
	}
}

// TestInteractiveOutputKeepsItAlive: what the agent prints on its
// terminal is activity: a run that prints a dot every half second for 6
// s, under an idle limit of 2 s and with nothing typed, ends by itself.
func TestInteractiveOutputKeepsItAlive(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"p.yaml": "extends: tier1\nlimits:\n  interactive: {idle: 2s, wall: 0}\n"})
	rec := recordPath(t)
	o := atTerminal(t, 24, 80, agentjail, "run", "--profile", dir+"/p.yaml", "--grace", "1s", "--record", rec, "--", "sh", "-c",
		`i=0; while [ $i -lt 12 ]; do printf .; sleep 0.5; i=$((i+1)); done; echo done`)
	code, out := o.wait(t)
	r := readRecord(t, rec, code)
	if code != 0 || r.Reason != "exit" || !strings.Contains(out, "............done") || r.Limits.IdleMS != 2000 || r.Terminal == nil || r.Terminal.InputBytes != 0 {
		t.Errorf("exit %d, reason %s, limits %+v, terminal %+v; the terminal showed %q", code, r.Reason, r.Limits, r.Terminal, out)
	}
}

// TestInteractiveUnderInit: in a container started with `docker run -it`
// (simulated: agentjail init as PID 1 of a new pid namespace, on the
// terminal), a run gets its terminal too.
func TestInteractiveUnderInit(t *testing.T) {
	jailed(t)
	o := atTerminal(t, 24, 80, "unshare", "--pid", "--fork", "--mount-proc", agentjail, "init", "--", agentjail, "run", "--", "sh", "-c", `tty; echo "size $(stty size)"`)
	code, out := o.wait(t)
	if code != 0 || !strings.Contains(out, "/dev/pts/0\r\n") || !strings.Contains(out, "size 24 80") {
		t.Errorf("exit %d; the terminal showed %q", code, out)
	}
	if o.after != o.before {
		t.Error("the terminal's modes changed")
	}
}

// TestInteractiveJobControl: an interactive run in the job-control shell
// it was started from. Started in the background (&), it stopped on
// SIGTTOU when it made the terminal raw, made again at each SIGCONT, so
// `kill %1` (SIGTERM, then SIGCONT) never ended it; and the keys typed to
// the shell meanwhile were the shell's only because of that stop. Now it
// waits for the foreground, the shell keeps its keys, and `kill %1` ends
// it. Stopped (kill -STOP) and continued, then brought back with fg, the
// terminal was left cooked (the shell makes it its own while the job is
// stopped): the agent's keys echoed twice, and ^C ended the run. Now the
// terminal is made raw again.
func TestInteractiveJobControl(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	aj := fmt.Sprintf("%s run --user %d --write %s --chdir %s --", agentjail, runUID, ws, ws)
	shell := func(t *testing.T) *operator {
		o := atTerminalEnv(t, 24, 200, []string{"PS1=OP$ ", "HOME=/"}, "bash", "--norc", "--noprofile", "-i")
		o.waitShown(t, "OP$ ")
		return o
	}

	// In the background, the run reads nothing typed to the shell, and
	// kill %1 ends it (143).
	background := func(t *testing.T, run, got, code string) {
		t.Parallel()
		o := shell(t)
		o.typed(t, fmt.Sprintf("%s sh -c 'read line; echo \"$line\" > %s' &\r", run, got))
		time.Sleep(time.Second) // no timing is asserted: an early line is the shell's either way
		o.typed(t, "echo typed-at-my-own-shell\r")
		o.waitShown(t, "\rtyped-at-my-own-shell\r\n")
		o.typed(t, "kill %1; wait %1; echo code=$?\r")
		o.waitShown(t, "code="+code)
		o.typed(t, "exit\r")
		o.wait(t)
		if fileExists(filepath.Join(ws, got)) {
			t.Errorf("the run read from the terminal in the background")
		}
	}
	t.Run("background", func(t *testing.T) { background(t, aj, "got", "143") })
	// The worker is outside the terminal's session: no SIGTTIN stops its
	// reads of the client's terminal, only the gate does.
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	t.Cleanup(startLauncher(t, sock).stop)
	t.Run("background through the launcher", func(t *testing.T) {
		background(t, fmt.Sprintf("AGENTJAIL_LAUNCHER=%s %s --tty --user %d --write %s --chdir %s --", sock, clientBin(), runUID, ws, ws), "got-launcher", "")
	})

	// The kernel sends SIGWINCH only to the terminal's foreground: a
	// resize while the run is in the background reaches the jail when it
	// gets the terminal back (fg).
	t.Run("resized in the background", func(t *testing.T) {
		t.Parallel()
		o := shell(t)
		o.typed(t, aj+" sh -c 'while :; do echo size=$(stty size); sleep 0.2; done' &\r")
		o.waitShown(t, "size=24 200")
		if err := unix.IoctlSetWinsize(int(o.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100}); err != nil {
			t.Fatal(err)
		}
		o.typed(t, "fg\r")
		o.waitShown(t, "size=30 100")
		o.typed(t, "\x03") // ^C, the agent's: the run ends
		waitFor(t, func() bool { return len(childrenOf(o.cmd.Process.Pid)) == 0 })
		o.typed(t, "echo code=$?\r")
		o.waitShown(t, "code=130")
		o.typed(t, "exit\r")
		o.wait(t)
	})

	t.Run("stopped and continued", func(t *testing.T) {
		t.Parallel()
		o := shell(t)
		o.typed(t, aj+" sh -c 'echo ready-$((6*7)); sleep 60'\r")
		o.waitShown(t, "ready-42")
		if m := o.modes(t); m.Lflag&unix.ICANON != 0 {
			t.Fatalf("the terminal is not raw during the run: %+v", m)
		}
		pid := agentjailUnder(t, o.cmd.Process.Pid)
		syscall.Kill(pid, syscall.SIGSTOP)
		o.waitShown(t, "Stopped")
		syscall.Kill(pid, syscall.SIGCONT)
		o.typed(t, "fg\r")
		waitFor(t, func() bool { return o.modes(t).Lflag&unix.ICANON == 0 })
		syscall.Kill(pid, syscall.SIGTERM)
		o.waitShown(t, "agentjail: the run ended")
		o.typed(t, "exit\r")
		o.wait(t)
	})
}

// agentjailUnder returns the pid of the agentjail that is a child of
// shell.
func agentjailUnder(t *testing.T, shell int) int {
	t.Helper()
	var pid int
	waitFor(t, func() bool {
		for _, p := range childrenOf(shell) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "agentjail" {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

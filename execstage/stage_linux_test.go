package execstage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The exec stage sets rlimits on its own process and execs: it runs in a
// helper process, the test binary re-executed (os/exec's pattern) for the
// Go stage, and the C stage (cmd/agentjail-exec) built here. Every case
// runs against both: they are one protocol.
func TestMain(m *testing.M) {
	if os.Getenv("EXECSTAGE_HELPER") == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "execstage-")
	if err != nil {
		panic(err)
	}
	cStage = filepath.Join(dir, Binary)
	if out, err := exec.Command("gcc", "-static", "-Os", "-Wall", "-Werror", "-o", cStage, "../cmd/agentjail-exec/stage.c").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the C stage: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cStage is the C stage TestMain built.
var cStage string

// stages are the two implementations: name → its command.
func stages() map[string]func(args ...string) *exec.Cmd {
	return map[string]func(args ...string) *exec.Cmd{
		"go": func(args ...string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "EXECSTAGE_HELPER=1")
			return cmd
		},
		"c": func(args ...string) *exec.Cmd { return exec.Command(cStage, args...) },
	}
}

// eachStage runs f as a subtest for each implementation.
func eachStage(t *testing.T, f func(t *testing.T, stage func(args ...string) *exec.Cmd)) {
	for name, stage := range stages() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, stage)
		})
	}
}

// execStage runs the exec stage with args and its report on fd 3.
func execStage(t *testing.T, stage func(args ...string) *exec.Cmd, args ...string) (stdout string, code int, reports []Report) {
	t.Helper()
	return execStageWith(t, stage, nil, args...)
}

// execStageWith is execStage with extra descriptors from fd 4 on.
func execStageWith(t *testing.T, stage func(args ...string) *exec.Cmd, extra []*os.File, args ...string) (stdout string, code int, reports []Report) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := stage(append([]string{"--report-fd", "3"}, args...)...)
	cmd.ExtraFiles = append([]*os.File{w}, extra...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(r)
	for {
		var rep Report
		if dec.Decode(&rep) != nil {
			break
		}
		reports = append(reports, rep)
	}
	cmd.Wait()
	return out.String(), cmd.ProcessState.ExitCode(), reports
}

func TestExecStageAppliesRlimitsAndReportsWhatItCouldNotRaise(t *testing.T) {
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		// nofile above fs.nr_open can be had by nobody: the inherited hard
		// limit is applied instead, and reported.
		out, code, reps := execStage(t, stage, "--rlimit", "core=0", "--rlimit", "nofile=999999999", "--rlimit", "cpu=unlimited",
			"--", "sh", "-c", "ulimit -c; ulimit -Hc; ulimit -n; ulimit -Hn")
		if code != 0 || len(reps) != 3 {
			t.Fatalf("exit %d, reports %+v", code, reps)
		}
		lines := strings.Fields(out)
		if len(lines) != 4 || lines[0] != "0" || lines[1] != "0" || lines[2] != lines[3] {
			t.Errorf("limits inside: %q", out)
		}
		if reps[1].Rlimit != "nofile" || reps[1].Asked != "999999999" || reps[1].Applied != lines[3] {
			t.Errorf("nofile report %+v, hard limit inside %s", reps[1], lines[3])
		}
		if reps[0].Applied != "0" || reps[2].Rlimit != "cpu" {
			t.Errorf("reports %+v", reps)
		}
	})
}

func TestExecStageReportsExecFailures(t *testing.T) {
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		_, code, reps := execStage(t, stage, "--", "no-such-command-anywhere")
		if code != 127 || len(reps) != 1 || reps[0].ExecFailure == nil || reps[0].ExecFailure.Path != "no-such-command-anywhere" {
			t.Errorf("not found: exit %d %+v", code, reps)
		}
		_, code, reps = execStage(t, stage, "--rlimit", "bogus=1", "--", "true")
		if code != 125 || len(reps) != 1 || !strings.Contains(reps[0].Error, `unknown rlimit "bogus"`) {
			t.Errorf("bad rlimit: exit %d %+v", code, reps)
		}
	})
}

// TestExecStageAppliesMemoryLimitsItCouldNotLiveUnder: address-space and
// data limits far below what the Go runtime has mapped reach the agent (a
// 128 MiB buffer cannot be had under 64 MiB), and an exec failure under
// them is still reported exactly. Whether an allocation after the limits
// would abort the runtime depends on its heap's state, which in this test
// binary spares it: the real binary did abort
// (TestProcessAndMemoryLimitsReachTheAgent in test/integration).
func TestExecStageAppliesMemoryLimitsItCouldNotLiveUnder(t *testing.T) {
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		out, code, reps := execStage(t, stage, "--rlimit", "as=67108864", "--rlimit", "data=67108864",
			"--", "sh", "-c", `ulimit -v; ulimit -Hv; ulimit -d; dd if=/dev/zero of=/dev/null bs=128M count=1 2>/dev/null; echo "dd $?"`)
		if code != 0 || len(reps) != 2 || reps[0].Applied != "67108864" || reps[1].Applied != "67108864" {
			t.Fatalf("exit %d, reports %+v, output %q", code, reps, out)
		}
		if out != "65536\n65536\n65536\ndd 1\n" {
			t.Errorf("inside: %q", out)
		}
		// And an exec failure is still reported exactly under such a limit.
		_, code, reps = execStage(t, stage, "--rlimit", "as=67108864", "--", "no-such-command-anywhere")
		if code != 127 || len(reps) != 2 || reps[1].ExecFailure == nil || reps[1].ExecFailure.Path != "no-such-command-anywhere" || reps[1].ExecFailure.Errno != 2 {
			t.Errorf("not found under as: exit %d %+v", code, reps)
		}
	})
}

// TestExecStageTakesNprocFromTheEnvironment: without a pids controller the
// supervisor hands limits.pids to the exec stage in NprocVar; the exec
// stage applies it as the rlimit nproc, reports it, and the agent never
// sees the variable. A profile's own nproc wins.
func TestExecStageTakesNprocFromTheEnvironment(t *testing.T) {
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		script := `grep 'Max processes' /proc/self/limits; env | grep -c ` + NprocVar + `; true`
		for _, c := range []struct {
			args []string
			want string
		}{
			{nil, "77"},
			{[]string{"--rlimit", "nproc=99"}, "99"},
		} {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{"--report-fd", "3"}, c.args...), "--", "sh", "-c", script)
			cmd := stage(args...)
			cmd.Env = append(cmd.Environ(), NprocVar+"=77")
			cmd.ExtraFiles = []*os.File{w}
			out, err := cmd.Output()
			w.Close()
			if err != nil {
				t.Fatalf("%v: %v", c.args, err)
			}
			var rep Report
			if err := json.NewDecoder(r).Decode(&rep); err != nil || rep.Rlimit != "nproc" || rep.Applied != c.want {
				t.Errorf("%v: report %+v, %v; want nproc %s", c.args, rep, err, c.want)
			}
			f := strings.Fields(string(out))
			if len(f) != 6 || f[2] != c.want || f[3] != c.want || f[5] != "0" {
				t.Errorf("%v: inside: %q; want nproc %s and no %s", c.args, out, c.want, NprocVar)
			}
		}
	})
}

// TestExecStageReportsExactPaths: a file found on PATH that cannot be
// executed is 126 with its path; a name the JSON report must escape comes
// back whole; an unsearchable PATH directory is passed over, as execvp(3)
// does.
func TestExecStageReportsExactPaths(t *testing.T) {
	// Both stages say it in the same words.
	said := map[string]string{}
	for name, stage := range stages() {
		var stderr bytes.Buffer
		cmd := stage("--", "no-such-command-anywhere")
		cmd.Stderr = &stderr
		cmd.Run()
		said[name] = stderr.String()
	}
	if said["go"] != said["c"] || !strings.Contains(said["c"], "cannot execute no-such-command-anywhere inside the jail: no such file or directory") {
		t.Errorf("the stages say %q", said)
	}
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "plain"), []byte("#!/bin/sh\n"), 0o644)
		run := func(path string, argv ...string) (int, []Report) {
			r, w, _ := os.Pipe()
			cmd := stage(append([]string{"--report-fd", "3", "--"}, argv...)...)
			cmd.Env = append(cmd.Environ(), "PATH="+path)
			cmd.ExtraFiles = []*os.File{w}
			cmd.Start()
			w.Close()
			var reps []Report
			dec := json.NewDecoder(r)
			for {
				var rep Report
				if dec.Decode(&rep) != nil {
					break
				}
				reps = append(reps, rep)
			}
			cmd.Wait()
			return cmd.ProcessState.ExitCode(), reps
		}
		if code, reps := run("/nonexistent:"+dir, "plain"); code != 126 || len(reps) != 1 || reps[0].ExecFailure == nil || reps[0].ExecFailure.Path != filepath.Join(dir, "plain") || reps[0].ExecFailure.Errno != 13 {
			t.Errorf("not executable: exit %d %+v", code, reps)
		}
		odd := dir + "/a \"quoted\"\tname\\x"
		if code, reps := run(dir, odd); code != 127 || len(reps) != 1 || reps[0].ExecFailure == nil || reps[0].ExecFailure.Path != odd {
			t.Errorf("odd name: exit %d %+v", code, reps)
		}
	})
}

// hasIPv6Loopback reports whether ::1 can be listened on here.
func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// TestExecStageHandsListenersBack: with --listen, the stage makes each
// listener before the agent exists and sends it over the control channel
// as one message with one descriptor, listening, named as getsockname
// says, from the stage's own pid; the agent inherits neither the listener
// nor the channel, and the channel ends at the exec.
func TestExecStageHandsListenersBack(t *testing.T) {
	want := 1
	if hasIPv6Loopback() {
		want = 2
	}
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		ours, theirs, err := Pair()
		if err != nil {
			t.Fatal(err)
		}
		defer ours.Close()
		cmd := stage("--control-fd", "3", "--listen", "127.0.0.1:0", "--listen", "[::1]:0", "--", "ls", "/proc/self/fd")
		cmd.ExtraFiles = []*os.File{theirs}
		var out bytes.Buffer
		cmd.Stdout = &out
		err = cmd.Start()
		theirs.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		var got []Message
		for {
			m, files, err := ReadControl(ours)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
			if m.Kind != KindListener || len(files) != 1 || m.Sender != cmd.Process.Pid {
				t.Fatalf("message %+v with %d files; the stage is pid %d", m, len(files), cmd.Process.Pid)
			}
			if v, err := unix.GetsockoptInt(int(files[0].Fd()), unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
				t.Errorf("%s: SO_ACCEPTCONN %d, %v", m.Addr, v, err)
			}
			l, err := net.FileListener(files[0])
			files[0].Close()
			if err != nil {
				t.Fatal(err)
			}
			if l.Addr().String() != m.Addr || strings.HasSuffix(m.Addr, ":0") {
				t.Errorf("message says %s, the socket listens on %s", m.Addr, l.Addr())
			}
			c, err := net.Dial("tcp", m.Addr)
			if err != nil {
				t.Errorf("dial %s: %v", m.Addr, err)
			} else {
				c.Close()
			}
			l.Close()
		}
		cmd.Wait()
		if len(got) != want || !strings.HasPrefix(got[0].Addr, "127.0.0.1:") || (want == 2 && !strings.HasPrefix(got[1].Addr, "[::1]:")) {
			t.Errorf("listeners %+v; want %d", got, want)
		}
		if fds := strings.Fields(out.String()); cmd.ProcessState.ExitCode() != 0 || !slices.Equal(fds, []string{"0", "1", "2", "3"}) {
			t.Errorf("exit %d; the agent's descriptors: %q (3 is ls's own)", cmd.ProcessState.ExitCode(), fds)
		}
	})
}

// TestExecStageRefusesListenersItCannotMake: a bad address, an address in
// use, or --listen without a channel end the stage with 125 before the
// agent runs.
func TestExecStageRefusesListenersItCannotMake(t *testing.T) {
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // the subtests run after this function returns
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		for _, c := range []struct{ addr, says string }{
			{"bogus", `--listen "bogus": not IP:PORT`},
			{"127.0.0.1:99999", `not IP:PORT`},
			{"[::ffff:127.0.0.1]:80", `not IP:PORT`},
			{"::1:80", `not IP:PORT`},
			{busy.Addr().String(), "bind: address already in use"},
		} {
			ours, theirs, err := Pair()
			if err != nil {
				t.Fatal(err)
			}
			out, code, reps := execStageWith(t, stage, []*os.File{theirs}, "--control-fd", "4", "--listen", c.addr, "--", "echo", "ran")
			if code != 125 || out != "" || len(reps) != 1 || !strings.Contains(reps[0].Error, c.says) {
				t.Errorf("--listen %s: exit %d, output %q, reports %+v; want 125 saying %q", c.addr, code, out, reps, c.says)
			}
			ours.Close()
			theirs.Close()
		}
		cmd := stage("--listen", "127.0.0.1:0", "--", "echo", "ran")
		if out, _ := cmd.Output(); cmd.ProcessState.ExitCode() != 125 || len(out) != 0 {
			t.Errorf("--listen without --control-fd: exit %d, output %q", cmd.ProcessState.ExitCode(), out)
		}
	})
}

// TestExecStageGivesTheAgentATerminal: with --pty the stage leads a new
// session on a pty, sends its master (a pty master, from the stage's own
// pid) and waits for the answer before the agent runs: the size set then
// is the one the agent sees first. The agent has the slave on 0, 1 and 2,
// as its controlling terminal, and leads the session; it reads what is
// typed on the master. Without an answer (the supervisor gone) the stage
// ends with 125 before the agent runs.
func TestExecStageGivesTheAgentATerminal(t *testing.T) {
	eachStage(t, func(t *testing.T, stage func(args ...string) *exec.Cmd) {
		ours, theirs, err := Pair()
		if err != nil {
			t.Fatal(err)
		}
		defer ours.Close()
		script := `test -t 0 && test -t 1 && test -t 2 && echo terminal on 0 1 2
read -r st < /proc/$$/stat; set -- $st; [ "$1" = "$6" ] && echo leads its session
stty size; read -r line; echo "got:$line"; echo "fds: $(ls /proc/self/fd | tr '\n' ' ')"`
		cmd := stage("--control-fd", "3", "--pty", "--", "sh", "-c", script)
		cmd.ExtraFiles = []*os.File{theirs}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Start()
		theirs.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		m, files, err := ReadControl(ours)
		if err != nil || m.Kind != KindPTY || len(files) != 1 || m.Sender != cmd.Process.Pid || m.PID != cmd.Process.Pid || m.PGID != m.PID || !m.Await {
			t.Fatalf("message %+v, %d files, %v; the stage is pid %d", m, len(files), err, cmd.Process.Pid)
		}
		master := files[0]
		defer master.Close()
		fd := int(master.Fd())
		if _, err := unix.IoctlGetInt(fd, unix.TIOCGPTN); err != nil {
			t.Fatalf("not a pty master: %v", err)
		}
		if sid, err := unix.IoctlGetInt(fd, unix.TIOCGSID); err != nil || sid != cmd.Process.Pid {
			t.Errorf("the pty's session %d, %v; want the stage's", sid, err)
		}
		if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 41, Col: 123}); err != nil {
			t.Fatal(err)
		}
		if err := Answer(ours); err != nil {
			t.Fatal(err)
		}
		if _, err := master.Write([]byte("typed\n")); err != nil {
			t.Fatal(err)
		}
		var out []byte
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf) // EIO once the slave's last holder is gone
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		cmd.Wait()
		text := strings.ReplaceAll(string(out), "\r\n", "\n")
		// ls's descriptors: 3 is its own directory.
		for _, want := range []string{"terminal on 0 1 2\n", "leads its session\n", "41 123\n", "got:typed\n", "fds: 0 1 2 3 \n"} {
			if !strings.Contains(text, want) {
				t.Errorf("the agent's terminal lacks %q:\n%s", want, text)
			}
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 || stderr.Len() > 0 {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
		if _, _, err := ReadControl(ours); err != io.EOF {
			t.Errorf("after the exec: %v, want EOF", err)
		}

		// The supervisor closes its end instead of answering.
		ours2, theirs2, err := Pair()
		if err != nil {
			t.Fatal(err)
		}
		cmd = stage("--control-fd", "3", "--pty", "--", "echo", "ran")
		cmd.ExtraFiles = []*os.File{theirs2}
		cmd.Stderr = &stderr
		stderr.Reset()
		err = cmd.Start()
		theirs2.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, files, err = ReadControl(ours2)
		if err != nil || len(files) != 1 {
			t.Fatalf("%d files, %v", len(files), err)
		}
		ours2.Close()
		cmd.Wait()
		files[0].Close() // not before: the pty's hangup would kill the stage
		if code := cmd.ProcessState.ExitCode(); code != 125 || !strings.Contains(stderr.String(), "the supervisor closed the control channel") {
			t.Errorf("no answer: exit %d, stderr %q", code, stderr.String())
		}
		if out := stage("--pty", "--", "echo", "ran"); out.Run() == nil || out.ProcessState.ExitCode() != 125 {
			t.Errorf("--pty without --control-fd: exit %d", out.ProcessState.ExitCode())
		}
	})
}

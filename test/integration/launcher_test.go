package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/procs"
)

// launcherUp starts `agentjail launcher` on a socket of the test's for the
// test's life and returns the socket and the launcher's log so far.
func launcherUp(t *testing.T) (string, func() string) {
	t.Helper()
	l := startLauncher(t, filepath.Join(t.TempDir(), "launcher.sock"))
	t.Cleanup(l.stop)
	return l.sock, l.log.String
}

// launcher is a started `agentjail launcher`.
type launcher struct {
	sock string
	cmd  *exec.Cmd
	log  *lockedBuffer
}

// startLauncher starts `agentjail launcher --socket sock` and waits until
// it listens.
func startLauncher(t *testing.T, sock string) launcher {
	t.Helper()
	l := launcher{sock: sock, cmd: exec.Command(agentjail, "launcher", "--socket", sock), log: &lockedBuffer{}}
	l.cmd.Stderr, l.cmd.Dir = l.log, "/"
	l.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(l.log.String(), "listening on") })
	return l
}

// stop ends the launcher as a service manager would, and waits for it.
func (l launcher) stop() { l.cmd.Process.Signal(syscall.SIGTERM); l.cmd.Wait() }

func clientBin() string { return filepath.Join(filepath.Dir(agentjail), "agentjail-run") }

// client is agentjail-run ARGS through the launcher at sock, started from /
// (a directory every run user may enter) with a minimal environment.
func client(sock string, args ...string) *exec.Cmd {
	cmd := exec.Command(clientBin(), args...)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "AGENTJAIL_LAUNCHER=" + sock}
	return cmd
}

// TestLauncherRunsAsRunWould: the same command lines through agentjail-run
// and a launcher, and through agentjail run, print the same, exit the
// same and write the same files: the client's directory (a relative
// --record), environment, umask, resource limits (a lowered soft limit is
// the jail's too), stdin, and descriptors (none of the launcher's reaches
// the jail). Each case runs twice through the launcher: a worker that has
// served one client serves the next as a fresh process would.
func TestLauncherRunsAsRunWould(t *testing.T) {
	jailed(t)
	sock, log := launcherUp(t)
	dir := workspace(t)
	script := `echo "out $PWD"; echo err >&2; echo "LANG=$LANG umask=$(umask) cpu=$(ulimit -S -t)"; ls /proc/$$/fd; cat; exit 7`
	wrap := []string{"sh", "-c", `umask 027; ulimit -S -t 4000; exec "$0" "$@"`}
	cold := invocation{dir: dir, env: []string{"LANG=POSIX"}, stdin: "typed\n", wrap: wrap}
	warm := cold
	warm.bin, warm.env = clientBin(), append(cold.env, "AGENTJAIL_LAUNCHER="+sock)
	args := func(record string) []string {
		return []string{"--profile", "tier1", "--write", dir, "--record", record, "--", "sh", "-c", script}
	}
	want := cold.run(t, append([]string{"run"}, args("cold.json")...)...)
	if want.code != 7 || !strings.Contains(want.stdout, "out "+dir) || !strings.Contains(want.stdout, "umask=0027 cpu=4000") || !strings.Contains(want.stdout, "typed") {
		t.Fatalf("agentjail run itself: exit %d\n%s\n%s", want.code, want.stdout, want.stderr)
	}
	for i, record := range []string{"warm1.json", "warm2.json"} {
		got := warm.run(t, args(record)...)
		if got.code != want.code || got.stdout != want.stdout || !strings.HasPrefix(got.stderr, "err\n") || got.stderr != strings.ReplaceAll(want.stderr, "cold.json", record) {
			t.Errorf("run %d through the launcher: exit %d, want %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", i+1, got.code, want.code, got.stdout, want.stdout, got.stderr, want.stderr)
		}
		var rec struct {
			Reason   string `json:"reason"`
			ExitCode int    `json:"exit_code"`
		}
		data, err := os.ReadFile(filepath.Join(dir, record))
		if err != nil || json.Unmarshal(data, &rec) != nil || rec.Reason != "exit" || rec.ExitCode != 7 {
			t.Errorf("run %d: the record at --record %s (relative to the client's directory): %v %s", i+1, record, err, data)
		}
	}
	if l := log(); strings.Contains(l, "worker") && strings.Contains(l, "ended") {
		t.Errorf("the launcher logged a worker's end:\n%s", l)
	}
}

// TestLauncherForwardsSignals: a signal sent to agentjail-run ends the run
// as it ends agentjail run (exit 143, the same last line), and a client
// killed outright (no signal to forward) ends its run too: the worker
// takes the client's end for a hang-up, writes the record and serves the
// next client.
func TestLauncherForwardsSignals(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	dir := workspace(t)
	start := func(record string) (*exec.Cmd, *lockedBuffer) {
		cmd := client(sock, "--user", "1000", "--write", dir, "--record", filepath.Join(dir, record), "--", "sh", "-c", "echo up; exec sleep 60")
		var stdout, stderr lockedBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Contains(stdout.String(), "up") })
		return cmd, &stderr
	}
	cmd, stderr := start("term.json")
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 || !strings.Contains(stderr.String(), "agentjail received SIGTERM (exit 143)") {
		t.Errorf("SIGTERM to agentjail-run: %v\n%s", err, stderr)
	}
	cmd, _ = start("killed.json")
	cmd.Process.Kill()
	cmd.Wait()
	defer func() {
		if t.Failed() {
			data, err := os.ReadFile(filepath.Join(dir, "killed.json"))
			t.Logf("killed.json: %v\n%s", err, data)
		}
	}()
	waitFor(t, func() bool {
		data, err := os.ReadFile(filepath.Join(dir, "killed.json"))
		return err == nil && strings.Contains(string(data), `"reason": "interrupted"`) && strings.Contains(string(data), "SIGHUP")
	})
	next := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "echo", "next")
	if next.code != 0 || next.stdout != "next\n" || next.stderr != "" {
		t.Errorf("the next client: exit %d %q %q", next.code, next.stdout, next.stderr)
	}
}

// TestLauncherRefuses: a client of another user is refused before the
// worker reads anything of it, and agentjail-run refuses a launcher of
// another user (it would hand it its descriptors and environment); a
// second launcher on a socket another listens on fails with exit 125; a
// socket whose launcher is gone is replaced, and removed when the
// launcher stops.
func TestLauncherRefuses(t *testing.T) {
	jailed(t)
	sock, log := launcherUp(t)
	for p := filepath.Dir(sock); p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	os.Chmod(sock, 0o666)
	nobody := &syscall.Credential{Uid: runUID, Gid: runUID}

	// The worker's check, reached with a client that does not check.
	socat := exec.Command("socat", "-u", "UNIX-CONNECT:"+sock, "-")
	socat.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	var socatErr bytes.Buffer
	socat.Stderr = &socatErr
	out, err := socat.Output()
	refusal := "R" + "a client of uid 1000, not this launcher's 0: refused; run agentjail run itself, or a launcher of your own\n"
	if err != nil || string(out) != refusal {
		t.Errorf("a client of uid %d: answered %q (%v), want %q: Refused and why, nothing else\n%s", runUID, out, err, refusal, socatErr.String())
	}
	waitFor(t, func() bool {
		return strings.Contains(log(), "a client of uid 1000, not this launcher's 0: refused")
	})

	// An agentjail-run of the release before, which takes any first
	// byte for the exit code: refused in its terms, 125 and a line on its
	// stderr.
	errR, errW, _ := os.Pipe()
	defer errR.Close()
	answer, err := olderClient(t, sock, errW)
	said, _ := io.ReadAll(errR)
	if !bytes.Equal(answer, []byte{125}) || !strings.Contains(string(said), "agentjail: launcher: not a request of agentjail-run") {
		t.Errorf("an older client: answered %q (%v), its stderr %q; want 125 and why", answer, err, said)
	}
	// Its stderr a full pipe nobody reads (blocking, as a client's
	// usually is): answered all the same, without the line.
	fullR, fullW, _ := os.Pipe()
	defer fullR.Close()
	wfd := int(fullW.Fd())
	syscall.SetNonblock(wfd, true)
	for {
		if _, err := syscall.Write(wfd, make([]byte, 4096)); err != nil {
			break
		}
	}
	syscall.SetNonblock(wfd, false)
	if answer, err := olderClient(t, sock, fullW); !bytes.Equal(answer, []byte{125}) {
		t.Errorf("an older client whose stderr is full: answered %q (%v), want 125", answer, err)
	}

	// The client's check.
	r := invocation{bin: clientBin(), cred: nobody, env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "runs as uid 0, not as this user (1000): refused") {
		t.Errorf("agentjail-run as uid 1000 against root's launcher: exit %d\n%s", r.code, r.stderr)
	}

	// A second launcher on the same socket; its look (a connection closed
	// before a byte) is nothing the first one logs.
	before := log()
	r = aj(t, "launcher", "--socket", sock)
	if r.code != 125 || !strings.Contains(r.stderr, "another launcher listens there") {
		t.Errorf("a second launcher: exit %d\n%s", r.code, r.stderr)
	}
	time.Sleep(500 * time.Millisecond) // for a worker to take and drop it (no timing is asserted)
	if after := strings.TrimPrefix(log(), before); after != "" {
		t.Errorf("the first launcher logs the second's look as a bad request:\n%s", after)
	}
	r = aj(t, "launcher", "--spares", "0")
	if r.code != 125 || !strings.Contains(r.stderr, "--spares 0: give 1 to 64 workers") {
		t.Errorf("--spares 0: exit %d\n%s", r.code, r.stderr)
	}
}

// olderClient sends sock the request of an agentjail-run of the release
// before (magic AJL1, no body), with stderr as its stderr (closed here),
// and returns its answer, read within 30 s.
func olderClient(t *testing.T, sock string, stderr *os.File) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := append([]byte("AJL1"), 0, 0, 0, 0)
	fds := []int{0, 1, int(stderr.Fd()), 0}
	if _, _, err := c.(*net.UnixConn).WriteMsgUnix(head, syscall.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return io.ReadAll(c)
}

// TestLauncherSocketLife: a socket left by a launcher that is gone is
// replaced; the socket is removed when the launcher stops, and is its
// user's alone (0600).
func TestLauncherSocketLife(t *testing.T) {
	jailed(t)
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	stale := exec.Command("socat", "UNIX-LISTEN:"+sock, "-")
	stale.Start()
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil })
	stale.Process.Kill()
	stale.Wait()
	l := startLauncher(t, sock)
	cmd, log := l.cmd, l.log
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v %v, want mode 0600", fi, err)
	}
	workers := childrenOf(cmd.Process.Pid)
	if len(workers) == 0 {
		t.Fatal("the launcher has no worker")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the launcher stopped with SIGTERM: %v\n%s", err, log.String())
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left after the launcher stopped: %v", err)
	}
	// Its waiting workers end with it: none would hold the socket.
	waitFor(t, func() bool {
		for _, pid := range workers {
			if !procs.Zombie("/proc", pid) {
				return false
			}
		}
		return true
	})
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	below, _ := procs.Descendants("/proc", pid)
	var kids []int
	for _, p := range below {
		if p.PPID == pid {
			kids = append(kids, p.PID)
		}
	}
	return kids
}

// TestLauncherFallback: agentjail-run with no launcher to reach runs
// agentjail run itself; a socket named by AGENTJAIL_LAUNCHER that cannot
// be reached is said first.
func TestLauncherFallback(t *testing.T) {
	jailed(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	r := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + missing}}.run(t, "--", "echo", "fell back")
	if r.code != 0 || r.stdout != "fell back\n" || !strings.Contains(r.stderr, "no launcher at "+missing+" (No such file or directory): running agentjail run itself") {
		t.Errorf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat("/run/agentjail/launcher.sock"); os.IsNotExist(err) {
		r = invocation{bin: clientBin()}.run(t, "--", "echo", "quietly")
		if r.code != 0 || r.stdout != "quietly\n" || r.stderr != "" {
			t.Errorf("no launcher at the default socket: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	}
	// A copy of the client with no agentjail beside it says so.
	lone := filepath.Join(t.TempDir(), "agentjail-run")
	copyExecutable(t, clientBin(), lone)
	os.Chmod(filepath.Dir(lone), 0o755)
	r = invocation{bin: lone, env: []string{"AGENTJAIL_LAUNCHER=" + missing}}.run(t, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "no launcher, and no agentjail beside agentjail-run") {
		t.Errorf("a client alone: exit %d\n%s", r.code, r.stderr)
	}
}

// TestLauncherAnswers: agentjail-run against a launcher that answers
// each way the protocol allows (a fake, here, of the test's user in its
// mount namespace): Taken and the run's code; a refusal, said; a stream
// that ends before Taken, a request no run took, which agentjail-run runs
// itself; one that ends after Taken, a run whose end is unknown, which is
// never run again; and a byte of no answer (an older launcher's exit code).
func TestLauncherAnswers(t *testing.T) {
	jailed(t)
	// A request larger than the socket's buffers: a launcher that stops
	// reading it (and answers, or not) is seen while it is sent.
	var big []string
	for i := range 8 {
		big = append(big, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 64<<10)))
	}
	for _, c := range []struct {
		name, answer   string
		code           int
		stdout, stderr string
		headOnly       bool // the fake reads the request's head, not its body
	}{
		{name: "taken", answer: "T\x07", code: 7},
		{name: "refused", answer: "Rno reason you would like\n", code: 125, stderr: "agentjail-run: the launcher at SOCK refused the request: no reason you would like"},
		{name: "not taken", code: 0, stdout: "ran\n", stderr: "agentjail-run: warning: the launcher at SOCK stopped before it took the request: running agentjail run itself"},
		{name: "taken, then gone", answer: "T", code: 125, stderr: "agentjail-run: the launcher's process ended without the run's exit code"},
		{name: "an older launcher", answer: "\x00", code: 125, stderr: "answered 0, not a launcher of this release: restart it"},
		{name: "refused while it is sent", answer: "Rtoo much\n", code: 125, stderr: "the launcher at SOCK refused the request: too much", headOnly: true},
		{name: "gone while it is sent", code: 0, stdout: "ran\n", stderr: "stopped before it took the request: running agentjail run itself", headOnly: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "fake.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				// The request, read whole (its head says how long), so
				// that the end of the stream is seen as such.
				head := make([]byte, 8)
				if _, err := io.ReadFull(conn, head); err == nil && !c.headOnly {
					io.CopyN(io.Discard, conn, int64(binary.LittleEndian.Uint32(head[4:])))
				}
				io.WriteString(conn, c.answer)
				conn.Close()
			}()
			env := []string{"AGENTJAIL_LAUNCHER=" + sock}
			if c.headOnly {
				env = append(env, big...)
			}
			r := invocation{bin: clientBin(), env: env}.run(t, "--", "echo", "ran")
			if want := strings.ReplaceAll(c.stderr, "SOCK", sock); r.code != c.code || r.stdout != c.stdout || !strings.Contains(r.stderr, want) {
				t.Errorf("answer %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", c.answer, r.code, r.stdout, r.stderr, c.code, c.stdout, want)
			}
		})
	}
}

// TestLauncherStopWithAQueuedClient: a client that connected while the
// launcher stopped, and that no worker took (the one waiting held, the
// other busy with a run), runs agentjail run itself at once rather than
// fail or wait; the run under way ends as it would have.
func TestLauncherStopWithAQueuedClient(t *testing.T) {
	jailed(t)
	l := startLauncher(t, filepath.Join(t.TempDir(), "launcher.sock"))
	defer l.stop()
	var first []int
	waitFor(t, func() bool { first = childrenOf(l.cmd.Process.Pid); return len(first) == 1 })
	busy := client(l.sock, "--", "sh", "-c", "echo started; read x; echo busy-done")
	release, err := busy.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer release.Close()
	busyOut := &lockedBuffer{}
	busy.Stdout = busyOut
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(busyOut.String(), "started") })
	// The spare started in its place is held, so that no worker takes
	// the next client before the launcher stops.
	var spare int
	waitFor(t, func() bool {
		for _, pid := range childrenOf(l.cmd.Process.Pid) {
			if pid != first[0] {
				spare = pid
				return true
			}
		}
		return false
	})
	syscall.Kill(spare, syscall.SIGSTOP)
	defer syscall.Kill(spare, syscall.SIGCONT)
	// Every thread of it stopped: one still on its way out of poll(2)
	// would stop after it saw the next client, and take it once let go
	// (seen on a busy host).
	waitFor(t, func() bool { return allStopped(spare) })
	queued := client(l.sock, "--", "echo", "queued-ran")
	var qOut, qErr bytes.Buffer
	queued.Stdout, queued.Stderr = &qOut, &qErr
	if err := queued.Start(); err != nil {
		t.Fatal(err)
	}
	// Connected, its request sent, waiting for an answer.
	waitFor(t, func() bool {
		stack, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", queued.Process.Pid))
		return strings.Contains(string(stack), "unix_stream")
	})
	l.cmd.Process.Signal(syscall.SIGTERM)
	// Turned away at once: it runs agentjail run itself while the run
	// under way goes on (whose worker holds the listening socket too).
	ended := make(chan error, 1)
	go func() { ended <- queued.Wait() }()
	select {
	case err = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the queued client waits for the run under way")
	}
	if err != nil || qOut.String() != "queued-ran\n" || !strings.Contains(qErr.String(), "stopped before it took the request: running agentjail run itself") {
		t.Errorf("the queued client: %v, stdout %q, stderr %q\nthe launcher's log:\n%s", err, qOut.String(), qErr.String(), l.log.String())
	}
	release.Close()
	if err := busy.Wait(); err != nil || busyOut.String() != "started\nbusy-done\n" {
		t.Errorf("the run under way: %v, %q", err, busyOut.String())
	}
}

// allStopped reports whether every thread of pid is stopped by a signal.
func allStopped(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, task := range tasks {
		stat, err := os.ReadFile(task)
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 || !bytes.HasPrefix(stat[i:], []byte(") T")) {
			return false
		}
	}
	return len(tasks) > 0
}

// TestLauncherKeepsItsSocketFromTheJail: while a run of a worker goes on,
// only the launcher and its workers hold the launcher's socket: not bwrap,
// the exec stage or the agent, which could otherwise take the next
// client's descriptors and environment.
func TestLauncherKeepsItsSocketFromTheJail(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	cmd := client(sock, "--", "sh", "-c", "echo up; exec sleep 30")
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	waitFor(t, func() bool { return strings.Contains(stdout.String(), "up") })
	out, err := exec.Command("ss", "-xlpn").Output()
	if err != nil {
		t.Fatalf("ss -xlpn: %v", err)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, " "+sock+" ") {
			line = l
		}
	}
	if !strings.Contains(line, `"agentjail"`) || !strings.Contains(line, `"exe"`) {
		t.Fatalf("ss shows the launcher's socket held by %q; want agentjail and its workers (exe)", line)
	}
	for _, holder := range regexp.MustCompile(`\("([^"]+)"`).FindAllStringSubmatch(line, -1) {
		if holder[1] != "agentjail" && holder[1] != "exe" {
			t.Errorf("the launcher's socket is held by %s during a run: %s", holder[1], line)
		}
	}
}

// TestLauncherTerminal: at a terminal (script(1)), agentjail-run gives the
// agent a terminal of its own as agentjail run does, with the caller's
// size.
func TestLauncherTerminal(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	inner := `stty cols 101 rows 31; %s -- sh -c 'test -t 0 && echo tty; stty size'`
	outputs := map[string]string{}
	for name, cmdline := range map[string]string{"run": agentjail + " run", "agentjail-run": clientBin()} {
		cmd := exec.Command("script", "-q", "-e", "-c", fmt.Sprintf(inner, cmdline), "/dev/null")
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "TERM=xterm", "AGENTJAIL_LAUNCHER=" + sock}
		// script's input held open and empty: at its end script would
		// type a NUL (echoed ^@) into the terminal, when it chooses to.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = r
		out, err := cmd.Output()
		r.Close()
		w.Close()
		if err != nil {
			t.Fatalf("%s at a terminal: %v\n%s", name, err, out)
		}
		outputs[name] = string(out)
	}
	if !strings.Contains(outputs["run"], "tty\r\n31 101\r\n") || outputs["agentjail-run"] != outputs["run"] {
		t.Errorf("at a terminal, agentjail run printed %q and agentjail-run %q", outputs["run"], outputs["agentjail-run"])
	}
}

// TestLauncherConcurrentClients: clients that come at once, more than
// the workers waiting, are each run, in their own streams, and answered
// their own exit code.
func TestLauncherConcurrentClients(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "sh", "-c", fmt.Sprintf("sleep 0.3; echo client %d; exit %d", i, 10+i))
			if r.code != 10+i || r.stdout != fmt.Sprintf("client %d\n", i) {
				t.Errorf("client %d: exit %d, stdout %q, stderr %q", i, r.code, r.stdout, r.stderr)
			}
		})
	}
	wg.Wait()
}

// TestLauncherWorkerStops: SIGTERM ends a worker that waits for a client
// (as systemd stopping the launcher's unit signals each of its
// processes), and the launcher starts another in its place.
func TestLauncherWorkerStops(t *testing.T) {
	jailed(t)
	l := startLauncher(t, filepath.Join(t.TempDir(), "launcher.sock"))
	defer l.stop()
	cmd, log := l.cmd, l.log
	var first []int
	waitFor(t, func() bool { first = childrenOf(cmd.Process.Pid); return len(first) > 0 })
	syscall.Kill(first[0], syscall.SIGTERM)
	waitFor(t, func() bool {
		now := childrenOf(cmd.Process.Pid)
		return len(now) > 0 && !slices.Contains(now, first[0])
	})
	if strings.Contains(log.String(), "before it took a request") {
		t.Errorf("the launcher took a stopped worker for a failing one:\n%s", log.String())
	}
}

// TestEscapeLauncherSocket: a jail that reaches the launcher's socket (here
// bound in on purpose, readable and writable by all) cannot launch through
// it: the run user is refused by its uid, and a jailed root (sealed,
// --user 0), whom the kernel reports as uid 0, by its mount namespace. A
// launch for a jailed root would be a run with any profile, --write / say,
// as the host's root. No plain-bwrap baseline: the door is agentjail's.
func TestEscapeLauncherSocket(t *testing.T) {
	jailed(t)
	sock, log := launcherUp(t)
	dir := filepath.Dir(sock)
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	os.Chmod(sock, 0o666)
	attack := "socat -u UNIX-CONNECT:" + sock + " -"
	for _, c := range []struct {
		name, refusal string
		args          []string
	}{
		{"run user", "a client of uid 65534, not this launcher's 0: refused", nil},
		{"jailed root", "a client in another mount namespace, where paths name other files: refused", []string{"--profile", "sealed", "--user", "0"}},
	} {
		r := aj(t, append(append([]string{"run", "--read", dir}, c.args...), "--", "sh", "-c", attack)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "R"+c.refusal) {
			t.Errorf("%s: exit %d, the launcher answered %q (want R%s…, its refusal)\n%s", c.name, r.code, r.stdout, c.refusal, r.stderr)
		}
		waitFor(t, func() bool { return strings.Contains(log(), c.refusal) })
	}
}

// TestLauncherStalledOutput: a run that gave up on its client's output (a
// reader that stopped reading, the run interrupted) leaves a write of it
// blocked; its worker exits after answering, so that what that write goes
// on to deliver never lands in the next client's output or the launcher's
// log.
func TestLauncherStalledOutput(t *testing.T) {
	jailed(t)
	sock, log := launcherUp(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := client(sock, "--", "sh", "-c", "echo up >&2; exec yes AAAA")
	var aErr lockedBuffer
	a.Stdout, a.Stderr = w, &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	waitFor(t, func() bool { return strings.Contains(aErr.String(), "up") })
	time.Sleep(200 * time.Millisecond) // the pipe and agentjail's buffers full
	a.Process.Signal(syscall.SIGINT)
	if err := a.Wait(); err == nil {
		t.Fatalf("the interrupted client exited 0:\n%s", aErr.String())
	}
	waitFor(t, func() bool {
		return strings.Contains(log(), "a run gave up on its client's output, still being written: this worker exits")
	})
	// The stalled write taken now, while the next client runs.
	go io.Copy(io.Discard, r)
	b := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "sh", "-c", "sleep 0.5; echo B")
	if b.code != 0 || b.stdout != "B\n" {
		t.Errorf("the next client: exit %d, stdout %.200q", b.code, b.stdout)
	}
	if strings.Contains(log(), "AAAA") {
		t.Errorf("the launcher's log has the stalled run's output:\n%.300s", log())
	}
}

// TestLauncherCallerLimits: the caller's resource limits are the jail's,
// as under agentjail run, without being the worker's (a CPU-time limit
// would count the worker's whole life), whose next client has its own.
func TestLauncherCallerLimits(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	wrap := []string{"sh", "-c", `ulimit -S -v 2000000; exec "$0" "$@"`}
	cold := invocation{wrap: wrap}.run(t, "run", "--", "sh", "-c", "ulimit -S -v")
	warm := invocation{wrap: wrap, bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "sh", "-c", "ulimit -S -v")
	if cold.code != 0 || cold.stdout != "2000000\n" || warm.code != cold.code || warm.stdout != cold.stdout {
		t.Errorf("ulimit -v in the jail: agentjail run exit %d %q %s; agentjail-run exit %d %q %s", cold.code, cold.stdout, cold.stderr, warm.code, warm.stdout, warm.stderr)
	}
	next := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "sh", "-c", "ulimit -S -v")
	if next.code != 0 || next.stdout != "unlimited\n" {
		t.Errorf("the next client: exit %d %q %s", next.code, next.stdout, next.stderr)
	}
}

// TestLauncherEarlySignal: a SIGINT sent to agentjail-run as soon as it
// catches it (before its request has gone, while the worker takes it,
// before the run catches signals) ends the run, as it ends agentjail run:
// exit 130, or 125 when it came while the profile was loaded. Kept by the
// client, then held by the worker until the run catches it: not lost.
func TestLauncherEarlySignal(t *testing.T) {
	jailed(t)
	sock, _ := launcherUp(t)
	for i := range 10 {
		cmd := client(sock, "--", "sleep", "20")
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
			m := regexp.MustCompile(`(?m)^SigCgt:\s*([0-9a-f]+)$`).FindSubmatch(status)
			caught, _ := strconv.ParseUint(string(m[1]), 16, 64)
			return m != nil && caught&(1<<(syscall.SIGINT-1)) != 0
		})
		time.Sleep(time.Duration(i%4) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 130 && (ee.ExitCode() != 125 || !strings.Contains(stderr.String(), "interrupted by SIGINT while loading the profile")) {
			t.Errorf("run %d, SIGINT %d ms after it was caught: %v, want exit 130\n%s", i, i%4, err, stderr.String())
		}
	}
}

// TestLauncherSilentClient: a client of the launcher's user that connects
// and sends nothing (or not all) holds a worker for 10 s, not for ever: it
// is answered 125 and the worker serves the next.
func TestLauncherSilentClient(t *testing.T) {
	jailed(t)
	sock, log := launcherUp(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	silent := exec.Command("socat", "STDIO", "UNIX-CONNECT:"+sock)
	silent.Stdin = r
	start := time.Now()
	out, err := silent.Output()
	r.Close()
	if err != nil || !strings.HasPrefix(string(out), "Rno whole request within 10s") || time.Since(start) > 25*time.Second {
		t.Errorf("a silent client: answered %q (%v) after %v, want its refusal after 10 s", out, err, time.Since(start))
	}
	if !strings.Contains(log(), "no whole request within 10s") {
		t.Errorf("the launcher's log:\n%s", log())
	}
	next := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "echo", "next")
	if next.code != 0 || next.stdout != "next\n" {
		t.Errorf("the next client: exit %d %q %s", next.code, next.stdout, next.stderr)
	}
}

// TestLauncherUnderInit: as docs/launcher.md sets it up in a container,
// `agentjail init` as PID 1 of a fresh pid namespace runs a script that
// starts the launcher, launches through it and stops it; init ends with the
// script's code, nothing left behind.
func TestLauncherUnderInit(t *testing.T) {
	jailed(t)
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	script := fmt.Sprintf(`%s launcher --socket %s 2>/dev/null & l=$!
while [ ! -S %s ]; do sleep 0.05; done
AGENTJAIL_LAUNCHER=%s %s -- echo through the launcher; code=$?
kill $l; wait $l; exit $code`, agentjail, sock, sock, sock, clientBin())
	r := invocation{wrap: []string{"unshare", "-pf", "--mount-proc"}}.run(t, "init", "--", "sh", "-c", script)
	if r.code != 0 || r.stdout != "through the launcher\n" {
		t.Errorf("init: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestLauncherGoneMidRun: a launcher that dies without stopping (SIGKILL)
// while a run goes on leaves that run's worker holding the socket. It
// lets go at once: the next client runs agentjail run itself (it was
// refused, exit 125, until the run ended: the socket's credentials were
// the dead launcher's), a new launcher takes the socket's path, and the
// run goes on to answer its client.
func TestLauncherGoneMidRun(t *testing.T) {
	jailed(t)
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	l := startLauncher(t, sock)
	long := client(sock, "--", "sh", "-c", "sleep 4; echo done")
	var out bytes.Buffer
	long.Stdout = &out
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(childrenOf(l.cmd.Process.Pid)) > 1 }) // a spare started beside the busy one
	time.Sleep(500 * time.Millisecond)                                        // the run taken
	// Not reaped yet, as under a shell or a service manager that has not
	// waited for it: its pid, the socket's credentials, is a zombie's.
	l.cmd.Process.Kill()
	waitFor(t, func() bool { return procs.Zombie("/proc", l.cmd.Process.Pid) })
	defer l.cmd.Wait()
	start := time.Now()
	r := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "echo", "fell back")
	if r.code != 0 || r.stdout != "fell back\n" || !strings.Contains(r.stderr, "running agentjail run itself") {
		t.Errorf("a client while the dead launcher's run goes on: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the client waited %v: for the run to end", d)
	}
	next := startLauncher(t, sock)
	defer next.stop()
	if err := long.Wait(); err != nil || out.String() != "done\n" {
		t.Errorf("the run under the dead launcher: %v %q", err, out.String())
	}
	r = invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "echo", "through the new one")
	if r.code != 0 || r.stdout != "through the new one\n" || r.stderr != "" {
		t.Errorf("through the new launcher: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestLauncherStopsOnHangup: a launcher started at a terminal gets SIGHUP
// when the terminal closes, and SIGQUIT is another way to stop one: each
// stops it as SIGTERM does, its socket removed (it died with the socket
// left, and a dump for SIGQUIT).
func TestLauncherStopsOnHangup(t *testing.T) {
	jailed(t)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		sock := filepath.Join(t.TempDir(), "launcher.sock")
		l := startLauncher(t, sock)
		l.cmd.Process.Signal(sig)
		if err := l.cmd.Wait(); err != nil {
			t.Errorf("%v: the launcher ended with %v\n%s", sig, err, l.log.String())
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%v: the socket is left: %v", sig, err)
		}
	}
}

// TestLauncherClientSeesTheMakerGone: a socket whose maker has exited,
// held by a process it left behind (a busy worker, before it shuts the
// socket down), is not a launcher to refuse (exit 125, "not in this
// mount namespace") but one that is gone: agentjail-run runs agentjail
// run itself and sends it nothing.
func TestLauncherClientSeesTheMakerGone(t *testing.T) {
	jailed(t)
	sock := filepath.Join(t.TempDir(), "launcher.sock")
	script := `import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
if os.fork() == 0:
    sys.stdin.read() # until the test ends
os._exit(0)`
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close() // the holder ends with the test
	maker := exec.Command("python3", "-c", script, sock)
	maker.Stdin = pr
	err = maker.Run() // the maker exits; its child holds the socket
	pr.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := invocation{bin: clientBin(), env: []string{"AGENTJAIL_LAUNCHER=" + sock}}.run(t, "--", "echo", "fell back")
	if r.code != 0 || r.stdout != "fell back\n" || !strings.Contains(r.stderr, "the launcher at "+sock+" is gone: running agentjail run itself") {
		t.Errorf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

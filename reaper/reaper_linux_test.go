package reaper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/procs"
)

// The main goroutine keeps the main thread (runtime.LockOSThread), so
// probeMainHelper, run from TestMain, calls endThread on it.
func init() { runtime.LockOSThread() }

// The reaper takes over wait4(-1) for the whole process, so its tests run
// in a helper process: the test binary re-executed (os/exec's pattern).
func TestMain(m *testing.M) {
	switch os.Getenv("REAPER_TEST_HELPER") {
	case "1":
		os.Exit(helper(false))
	case "auto":
		os.Exit(helper(true))
	case "end":
		os.Exit(endHelper())
	case "sweep":
		os.Exit(sweepHelper())
	case "init-verbose":
		os.Exit(initVerboseHelper())
	case "probe-main":
		os.Exit(probeMainHelper())
	case "sweep-at-exit":
		os.Exit(sweepAtExitHelper())
	}
	os.Exit(m.Run())
}

// helper starts children that exit with known codes or die by a signal,
// one whose own child must still be waitable (nothing of the reaper's
// SIGCHLD set-up may reach a command), and one that leaves orphans behind;
// it reports what Wait saw and what became of the orphans. auto begins
// with BeginAutoreap.
func helper(auto bool) int {
	begin := Begin
	if auto {
		begin = BeginAutoreap
	}
	if err := begin(); err != nil {
		fmt.Println("begin:", err)
		return 1
	}
	var cmds []*exec.Cmd
	for i := range 20 {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", i))
		if err := Start(cmd); err != nil {
			fmt.Println("start:", err)
			return 1
		}
		cmds = append(cmds, cmd)
	}
	segv := exec.Command("sh", "-c", "kill -SEGV $$")
	var grandchild strings.Builder
	waiter := exec.Command("sh", "-c", `sh -c "exit 3" & wait $!; echo $?; grep SigIgn /proc/self/status`)
	waiter.Stdout = &grandchild
	// Double-forked orphans: re-parented to us, then reaped and counted,
	// or released by the kernel.
	orphanMaker := exec.Command("sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.05 &) ; done; exit 42")
	for _, cmd := range []*exec.Cmd{segv, waiter, orphanMaker} {
		if err := Start(cmd); err != nil {
			fmt.Println("start:", err)
			return 1
		}
	}
	for i, cmd := range cmds {
		ws, err := Wait(cmd)
		if err != nil || ws.ExitStatus() != i {
			fmt.Printf("child %d: status %d, %v\n", i, ws.ExitStatus(), err)
			return 1
		}
	}
	segvWS, _ := Wait(segv)
	Wait(waiter)
	ch, err := Done(orphanMaker)
	if err != nil {
		fmt.Println("done:", err)
		return 1
	}
	ws := <-ch
	Release(orphanMaker)
	deadline := time.Now().Add(10 * time.Second)
	for (Orphans() < 5 && !auto || hasChildren()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// The grandchild's status, and whether the command ignored SIGCHLD.
	var code int
	var sigIgn uint64
	fmt.Sscanf(grandchild.String(), "%d\nSigIgn: %x", &code, &sigIgn)
	fmt.Printf("autoreap=%v segv=%v grandchild=%d sigchld-ignored=%v orphan-maker=%d orphans=%d children=%v zombies=%d\n",
		Autoreaping(), segvWS.Signal() == syscall.SIGSEGV, code, sigIgn&(1<<(syscall.SIGCHLD-1)) != 0,
		ws.ExitStatus(), Orphans(), hasChildren(), zombies(os.Getpid()))
	return 0
}

// zombies counts zombie children of pid.
func zombies(pid int) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		var state string
		var ppid int
		fmt.Sscanf(rest, "%s %d", &state, &ppid)
		if ppid == pid && state == "Z" {
			n++
		}
	}
	return n
}

// endHelper leaves a tree behind its child — one process ignoring
// SIGTERM, one in a new session that exits on it, one plain sleep — and
// ends it with EndDescendants.
func endHelper() int {
	if err := Begin(); err != nil {
		fmt.Println("begin:", err)
		return 1
	}
	// The trap comes after the children start: a signal ignored when a
	// shell starts cannot be trapped by it (dash(1), trap).
	cmd := exec.Command("sh", "-c", `sleep 1000 & setsid sh -c 'trap "exit 0" TERM; while :; do sleep 0.01; done' & trap "" TERM; while :; do sleep 0.01; done`)
	if err := Start(cmd); err != nil {
		fmt.Println("start:", err)
		return 1
	}
	deadline := time.Now().Add(10 * time.Second)
	var before []procs.Held
	for len(before) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		procs.Release(before)
		var err error
		if before, err = descendants("/proc"); err != nil {
			fmt.Println("descendants:", err)
			return 1
		}
	}
	procs.Release(before)
	var log []string
	err := EndDescendants(100*time.Millisecond, "", nil, func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) })
	after, _ := descendants("/proc")
	defer procs.Release(after)
	if err != nil || len(after) > 0 {
		for _, p := range after { // clean up what the code under test left
			unix.PidfdSendSignal(p.FD, unix.SIGKILL, nil, 0)
		}
		fmt.Printf("err=%v after=%d\n%s\n", err, len(after), strings.Join(log, "\n"))
		return 1
	}
	ws, _ := Wait(cmd)
	fmt.Printf("before=%d after=%d err=%v sh=%d zombies=%d\n", min(len(before), 3), len(after), err, ExitCode(ws), zombies(os.Getpid()))
	return 0
}

// sweepHelper runs Init on a command that waits until the sweep hook has
// run twice.
func sweepHelper() int {
	dir, err := os.MkdirTemp("", "reaper-sweep-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	n := 0
	code, err := Init(exec.Command("sh", "-c", "until [ -e "+dir+"/2 ]; do sleep 0.01; done; exit 3"), InitOptions{
		Sweep:      func() { n++; os.WriteFile(filepath.Join(dir, fmt.Sprint(n)), nil, 0o600) },
		SweepEvery: 5 * time.Millisecond,
	})
	fmt.Printf("code=%d err=%v autoreap=%v\n", code, err, Autoreaping())
	return 0
}

// initVerboseHelper runs Init with a log: it must reap with wait4 itself,
// to see each orphan.
func initVerboseHelper() int {
	code, err := Init(exec.Command("sh", "-c", "exit 3"), InitOptions{Logf: func(string, ...any) {}})
	fmt.Printf("code=%d err=%v autoreap=%v\n", code, err, Autoreaping())
	return 0
}

// probeMainHelper runs endThread on the main thread, which never ends: it
// must hand the probe to another thread.
func probeMainHelper() int {
	onMain := unix.Gettid() == unix.Getpid()
	fds := make(chan int, 1)
	endThread(fds)
	fmt.Printf("main-thread=%v kept=%v\n", onMain, keptAtExit(<-fds))
	return 0
}

// sweepAtExitHelper runs Init with a sweep still under way when the
// command ends (it outlasts the command by 200 ms) and reports whether
// Init returned before the sweep had finished, which would lose its log.
func sweepAtExitHelper() int {
	dir, err := os.MkdirTemp("", "reaper-sweep-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	var finished atomic.Bool
	exiting := filepath.Join(dir, "exiting")
	code, err := Init(exec.Command("sh", "-c", "touch "+exiting+"; exit 3"), InitOptions{
		Sweep: func() {
			for !fileThere(exiting) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			finished.Store(true)
		},
		SweepEvery: time.Hour,
	})
	fmt.Printf("code=%d err=%v sweep finished=%v\n", code, err, finished.Load())
	return 0
}

func fileThere(p string) bool { _, err := os.Stat(p); return err == nil }

// runHelper runs the test binary as a helper in mode and returns what it
// printed.
func runHelper(t *testing.T, mode string) string {
	t.Helper()
	// A reaper that loses a status would hang the helper: fail instead.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REAPER_TEST_HELPER="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestReaperDeliversStatusesAndReapsOrphans(t *testing.T) {
	t.Parallel()
	want := `autoreap=false segv=true grandchild=3 sigchld-ignored=false orphan-maker=42 orphans=5 children=false zombies=0`
	if got := runHelper(t, "1"); got != want {
		t.Errorf("helper reported\n%s\nwant\n%s", got, want)
	}
}

// TestBeginAutoreap: the same children, their statuses now read from
// their pidfds; the orphans are released by the kernel, so none is
// counted and none is ever a zombie — where the kernel keeps a released
// process's status for its pidfd, which a process of this test, waited for
// the usual way, tells apart from the thread probe BeginAutoreap uses.
func TestBeginAutoreap(t *testing.T) {
	t.Parallel()
	auto, orphans := releasedStatusKept(t), 0
	if !auto {
		orphans = 5 // Begin's mode: reaped and counted
	}
	want := fmt.Sprintf(`autoreap=%v segv=true grandchild=3 sigchld-ignored=false orphan-maker=42 orphans=%d children=false zombies=0`, auto, orphans)
	if got := runHelper(t, "auto"); got != want {
		t.Errorf("helper reported\n%s\nwant\n%s", got, want)
	}
}

// TestInitChoosesTheReaping: quiet Init has the kernel reap where it can
// (TestInitRunsTheSweep's helper is quiet); verbose Init reaps itself.
func TestInitChoosesTheReaping(t *testing.T) {
	t.Parallel()
	if got, want := runHelper(t, "init-verbose"), "code=3 err=<nil> autoreap=false"; got != want {
		t.Errorf("verbose: helper reported %q, want %q", got, want)
	}
}

// TestProbeOnTheMainThread: the probe, started on the main thread (which
// Go never ends), still ends a thread and reads its status.
func TestProbeOnTheMainThread(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("main-thread=true kept=%v", releasedStatusKept(t))
	if got := runHelper(t, "probe-main"); got != want {
		t.Errorf("helper reported %q, want %q", got, want)
	}
}

// releasedStatusKept reports whether this kernel gives a process's exit
// status through its pidfd after the process was reaped (PIDFD_INFO_EXIT).
func releasedStatusKept(t *testing.T) bool {
	t.Helper()
	pidfd := -1
	cmd := exec.Command("sh", "-c", "exit 7")
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("sh -c 'exit 7': %v", err)
	}
	defer unix.Close(pidfd)
	// Asked here, not through exitStatus: a broken exitStatus must not
	// make the expected mode the fallback.
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	ok := unix.IoctlPidfdInfo(pidfd, &info) == nil && info.Mask&unix.PIDFD_INFO_EXIT != 0
	if ws := syscall.WaitStatus(info.Exit_code); ok && ws.ExitStatus() != 7 {
		t.Fatalf("the pidfd says exit %d, wait said 7", ws.ExitStatus())
	}
	return ok
}

// Every descendant ends — the one ignoring SIGTERM by SIGKILL after the
// grace — and nothing is left, not even a zombie.
func TestEndDescendants(t *testing.T) {
	t.Parallel()
	if got := runHelper(t, "end"); got != "before=3 after=0 err=<nil> sh=137 zombies=0" {
		t.Errorf("helper reported %q", got)
	}
}

// TestInitWaitsForASweepUnderWay: init does not exit in the middle of a
// sweep (what it killed would go unlogged).
func TestInitWaitsForASweepUnderWay(t *testing.T) {
	t.Parallel()
	if got := runHelper(t, "sweep-at-exit"); got != "code=3 err=<nil> sweep finished=true" {
		t.Errorf("helper reported %q", got)
	}
}

func TestInitRunsTheSweep(t *testing.T) {
	t.Parallel()
	if got, want := runHelper(t, "sweep"), fmt.Sprintf("code=3 err=<nil> autoreap=%v", releasedStatusKept(t)); got != want {
		t.Errorf("helper reported %q, want %q", got, want)
	}
}

// TestDeliverTellsChildFromOrphan: the reaping goroutine takes a status
// before it looks the pid up, so a registered child still running must not
// be handed the status of an orphan that held its pid before it (pid
// reuse); its pidfd decides. Run in this process: deliver needs no Begin.
func TestDeliverTellsChildFromOrphan(t *testing.T) {
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	gone := exec.Command("true")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	goneFD, err := unix.PidfdOpen(gone.Process.Pid, 0)
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	gone.Wait() // reaped: its pidfd now answers ESRCH
	liveFD, err := unix.PidfdOpen(live.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A descriptor the call refuses stands for a seccomp profile that
	// denies pidfd_send_signal: the child must still get its status.
	notPidfd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	const pidLive, pidGone, pidNoFD, pidDenied = 1 << 30, 1<<30 + 1, 1<<30 + 2, 1<<30 + 3 // never real pids
	mu.Lock()
	for pid, fd := range map[int]int{pidLive: liveFD, pidGone: goneFD, pidNoFD: -1, pidDenied: notPidfd} {
		children[pid] = &child{status: make(chan syscall.WaitStatus, 1), pidfd: fd}
	}
	before := orphans
	mu.Unlock()
	defer func() {
		mu.Lock()
		for _, pid := range []int{pidLive, pidGone, pidNoFD, pidDenied} {
			if fd := children[pid].pidfd; fd >= 0 {
				unix.Close(fd)
			}
			delete(children, pid)
		}
		mu.Unlock()
	}()

	for _, pid := range []int{pidLive, pidGone, pidNoFD, pidDenied} {
		deliver(pid, syscall.WaitStatus(7<<8))
	}
	mu.Lock()
	defer mu.Unlock()
	if c := children[pidLive]; c.reaped || len(c.status) != 0 {
		t.Error("a running child was handed the status of an orphan that held its pid")
	}
	if got := orphans - before; got != 1 {
		t.Errorf("orphans counted: %d, want 1 (the status the running child was not given)", got)
	}
	for _, pid := range []int{pidGone, pidNoFD, pidDenied} {
		if c := children[pid]; !c.reaped || len(c.status) != 1 {
			t.Errorf("child %d (pidfd %d): its own status was not delivered", pid, c.pidfd)
		}
	}
}

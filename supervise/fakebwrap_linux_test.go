package supervise

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/reaper"
)

// The supervisor's tests run it against a fake bwrap: this test binary,
// re-executed (Go's exec_test.go pattern), speaking what bwrap speaks to
// its caller on the descriptors the supervisor hands it:
//
//	--json-status-fd N  {"child-pid": P} once the sandbox exists, and
//	                    {"exit-code": C} after the command ran
//	--block-fd N        the sandbox waits for a byte (or EOF) before it
//	                    runs anything
//	--info-fd N         {"child-pid": P}, as bwrap writes it
//
// and what the supervisor relies on: the sandbox is a child of the fake in
// a session of its own (--new-session: its pid is the process group the
// supervisor signals), carries the environment (the run's marker), dies
// with the fake (--die-with-parent), runs the command as its child (bwrap's
// init, deaf to the signals it has no handler for) and exits with its status, 128+n after death by signal n. Other
// flags before "--" are taken with one value when they are known to have
// one, else none. The exec stage's control channel (execstage.FDControl),
// when the supervisor opens one, reaches the command at the same number,
// as bwrap passes it; a command run with fakeStageEnv is the Go exec
// stage. No root, no bubblewrap, no namespaces: the core of the
// supervisor (start, watch, escalate, sweep, drain) is tested anywhere.
const (
	fakeBwrapEnv   = "AGENTJAIL_TEST_FAKE_BWRAP"
	fakeSandboxEnv = "AGENTJAIL_TEST_FAKE_SANDBOX"
	// fakeMountFailsEnv makes the fake bwrap's sandbox fail its mounts.
	fakeMountFailsEnv = "AGENTJAIL_TEST_FAKE_MOUNT_FAILS"
	fakeStageEnv      = "AGENTJAIL_TEST_STAGE"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(fakeSandboxEnv) != "":
		os.Exit(fakeSandbox())
	case os.Getenv(fakeBwrapEnv) != "":
		os.Exit(fakeBwrap(os.Args[1:]))
	case os.Getenv(fakeStageEnv) != "":
		os.Exit(execstage.Main(os.Args[1:]))
	}
	if err := reaper.Begin(); err != nil { // Run starts bwrap through the reaper
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// fakeBwrap is bwrap for the tests: it parses the flags the supervisor
// gives, starts the sandbox, reports it and waits for it.
func fakeBwrap(args []string) int {
	status, block, info := -1, -1, -1
	withValue := map[string]bool{"--add-seccomp-fd": true, "--chdir": true}
	for len(args) > 0 && args[0] != "--" {
		flag := args[0]
		args = args[1:]
		switch flag {
		case "--json-status-fd", "--block-fd", "--info-fd":
			fd, err := strconv.Atoi(args[0])
			if err != nil {
				fmt.Fprintf(os.Stderr, "fake bwrap: %s %q\n", flag, args[0])
				return 1
			}
			*map[string]*int{"--json-status-fd": &status, "--block-fd": &block, "--info-fd": &info}[flag] = fd
			args = args[1:]
		default:
			if withValue[flag] {
				args = args[1:]
			}
		}
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "fake bwrap: no command")
		return 1
	}
	if os.Getenv(fakeMountFailsEnv) != "" {
		// Real bwrap's child does the mounts: one that fails ends it, and
		// bwrap may reap it before the supervisor reads the child-pid
		// line (here always).
		gone := exec.Command("/bin/true")
		gone.Run()
		fmt.Fprintln(os.Stderr, "bwrap: Can't mkdir parents for /x: Read-only file system")
		data, _ := json.Marshal(map[string]int{"child-pid": gone.Process.Pid})
		unix.Write(status, append(data, '\n'))
		return 1
	}
	sandbox := exec.Command(os.Args[0], args[1:]...)
	sandbox.Env = append(os.Environ(), fakeSandboxEnv+"=1")
	sandbox.Stdin, sandbox.Stdout, sandbox.Stderr = os.Stdin, os.Stdout, os.Stderr
	// bwrap reports the sandbox it cloned, which runs bwrap's own code
	// with bwrap's environment; the fake's sandbox is exec'd, so it is
	// reported once it runs (its /proc environ read mid-exec is empty).
	started, ready, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake bwrap: %v\n", err)
		return 1
	}
	blockFile := os.NewFile(uintptr(block), "block")
	if block < 0 {
		blockFile, _ = os.Open(os.DevNull)
	}
	sandbox.ExtraFiles = []*os.File{blockFile, ready, nil, control()} // fds 3, 4 and FDControl in the sandbox
	sandbox.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := sandbox.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "fake bwrap: %v\n", err)
		return 1
	}
	ready.Close()
	var b [1]byte
	started.Read(b[:])
	line := func(fd int, v any) {
		if fd >= 0 {
			data, _ := json.Marshal(v)
			unix.Write(fd, append(data, '\n'))
		}
	}
	line(status, map[string]int{"child-pid": sandbox.Process.Pid})
	line(info, map[string]int{"child-pid": sandbox.Process.Pid})
	sandbox.Wait()
	ws := sandbox.ProcessState.Sys().(syscall.WaitStatus)
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	// The sandbox exits 255 when the command could not start (bwrap writes
	// no exit-code then).
	if code != 255 {
		line(status, map[string]int{"exit-code": code})
	}
	return code
}

// fakeSandbox is the sandbox's init: it says it runs (closes fd 4), waits
// on the block descriptor (fd 3), then runs the command and passes on its
// status.
func fakeSandbox() int {
	// A pid namespace's init gets no signal it has no handler for
	// (pid_namespaces(7)): caught and dropped here, reset to the default
	// in the command by exec.
	signal.Notify(make(chan os.Signal, 16), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	os.NewFile(4, "ready").Close()
	block := os.NewFile(3, "block")
	var b [1]byte
	block.Read(b[:]) // a byte or EOF
	block.Close()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Env = os.Environ()
	for i, kv := range cmd.Env {
		if kv == fakeSandboxEnv+"=1" || kv == fakeBwrapEnv+"=1" {
			cmd.Env[i] = "AGENTJAIL_TEST_UNUSED=1"
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{nil, nil, nil, control()}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "fake sandbox: %v\n", err)
		return 255
	}
	cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// control is the control channel's descriptor when it is open, else nil
// (the runtime's own descriptors may take the number when it is closed).
func control() *os.File {
	if t, err := unix.GetsockoptInt(execstage.FDControl, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || t != unix.SOCK_SEQPACKET {
		return nil
	}
	return os.NewFile(execstage.FDControl, "control")
}

// fakeSpec is a Spec that runs argv in the fake bwrap with the marker of
// a fresh run id.
func fakeSpec(t *testing.T, argv ...string) Spec {
	t.Helper()
	id := fmt.Sprintf("fake-%d-%s", os.Getpid(), t.Name())
	return Spec{
		Bwrap: os.Args[0],
		Args:  append([]string{"--json-status-fd", "3", "--block-fd", "5", "--"}, argv...),
		Env:   []string{"PATH=/usr/bin:/bin", fakeBwrapEnv + "=1", "AGENTJAIL_RUN=" + id},
		RunID: id,
	}
}

package supervise

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/record"
)

// ttySpec runs script on a terminal of its own: the Go exec stage in the
// fake jail opens the pty and sends its master, which Control attaches.
func ttySpec(t *testing.T, script string) Spec {
	spec := fakeSpec(t, os.Args[0], "--control-fd", strconv.Itoa(execstage.FDControl), "--pty", "--", "sh", "-c", script)
	spec.Env = append(spec.Env, fakeStageEnv+"=1")
	spec.Tty = NewTty(nil, false)
	spec.Control = func(m execstage.Message, files []*os.File) {
		if m.Kind != execstage.KindPTY || len(files) != 1 {
			t.Errorf("Control got %+v with %d files", m, len(files))
			return
		}
		spec.Tty.Attach(files[0], m.Sender)
	}
	return spec
}

// TestRunOnATerminal: the agent has the pty on 0, 1 and 2; what it
// prints, through the pty, is the run's stdout (with the pty's \r\n), what
// is typed reaches it, and the record says so.
func TestRunOnATerminal(t *testing.T) {
	t.Parallel()
	spec := ttySpec(t, `test -t 0 && test -t 1 && test -t 2 && echo on a terminal; read -r l; echo "got:$l"; echo err >&2`)
	var stdout, stderr bytes.Buffer
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader("typed\n"), &stdout, &stderr
	out, err := Run(spec)
	r := out.Record
	if err != nil || r.Reason != record.ReasonExit || r.ExitCode != 0 {
		t.Fatalf("%v: reason %s, exit %d; stderr %q", err, r.Reason, r.ExitCode, stderr.String())
	}
	got := stdout.String()
	for _, want := range []string{"on a terminal\r\n", "got:typed\r\n", "err\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("stdout lacks %q: %q", want, got)
		}
	}
	if stderr.Len() != 0 || r.IO != record.IOPty || r.Terminal == nil || r.Terminal.InputBytes != 6 || r.Bytes.Stdout != int64(len(got)) {
		t.Errorf("stderr %q, io %q, terminal %+v, bytes %+v", stderr.String(), r.IO, r.Terminal, r.Bytes)
	}
}

// TestRunOnATerminalReachesTheSession: the agent leads a session of its
// own, apart from the jail's process group; a SIGTERM to agentjail, with
// SIGCONT, reaches it there, and an agent that traps SIGTERM gets SIGKILL
// after the grace (here the marker sweep's: the fake jail has no pid
// namespace for the SIGKILL to end).
func TestRunOnATerminalReachesTheSession(t *testing.T) {
	t.Parallel()
	spec := ttySpec(t, `trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done`)
	spec.Grace = 500 * time.Millisecond
	sigs := make(chan os.Signal, 1)
	stdout := &syncBuffer{}
	spec.Stdin, spec.Stdout, spec.Stderr, spec.Signals = nil, stdout, &bytes.Buffer{}, sigs
	go func() {
		for !strings.Contains(stdout.String(), "ready") {
			time.Sleep(10 * time.Millisecond)
		}
		sigs <- syscall.SIGTERM
	}()
	out, err := Run(spec)
	r := out.Record
	if err != nil || r.Reason != record.ReasonInterrupted || r.ExitCode != 128+15 {
		t.Fatalf("%v: reason %s, exit %d", err, r.Reason, r.ExitCode)
	}
	if s := sent(r); !slices.Contains(s, "SIGTERM>session") || !slices.Contains(s, "SIGCONT>session") {
		t.Errorf("signals sent %v", s)
	}
	if !strings.Contains(stdout.String(), "got TERM") {
		t.Errorf("the agent's trap did not run: %q", stdout.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

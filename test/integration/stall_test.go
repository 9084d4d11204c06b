package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStalledReaderDoesNotHangTheRun: agentjail's stdout is a FIFO that is
// held open and never read (a terminal paused with ^S, a hung log
// shipper). The wall timeout ends the jail; agentjail then waits for its
// reader only so long (30 s without a byte taken), or until a SIGTERM,
// says in the record how much went undelivered, and exits. Before, it
// waited for ever and ignored signals.
func TestStalledReaderDoesNotHangTheRun(t *testing.T) {
	jailed(t)
	for _, c := range []struct {
		name   string
		signal bool
		want   string
	}{
		{"stall", false, "gave up after 30s without a byte taken"},
		{"SIGTERM", true, "gave up on SIGTERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "out")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			held, err := os.OpenFile(fifo, os.O_RDWR, 0) // open, never read
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			out, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			rp := recordPath(t)
			cmd := exec.Command(agentjail, "run", "--timeout", "1", "--grace", "1", "--record", rp, "--", "yes")
			var stderr strings.Builder
			cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = []string{"PATH=/usr/bin:/bin"}, "/", out, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })
			if c.signal {
				// Once the jail has ended (no process of the run is left),
				// agentjail is only waiting on its reader.
				id := runOf(t, cmd.Process.Pid).RunID
				waitFor(t, func() bool { return len(procsWithEnv("AGENTJAIL_RUN="+id)) == 0 })
				cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("agentjail hangs on a reader that never reads; its processes:\n%s", stuck(cmd.Process.Pid))
			}
			rec := readRecord(t, rp, 124)
			if rec.Reason != "wall_timeout" {
				t.Errorf("reason %s, want wall_timeout", rec.Reason)
			}
			warned := strings.Join(rec.Warnings, "\n")
			if !strings.Contains(warned, "agentjail's stdout stopped taking output") || !strings.Contains(warned, c.want) {
				t.Errorf("warnings lack %q:\n%s", c.want, warned)
			}
			if !strings.Contains(warned, "--log would have them all") { // no --log here
				t.Errorf("the warning does not say where the output went without --log:\n%s", warned)
			}
			// A stderr of its own still hears the ending (it was silenced
			// with the stalled stdout).
			if !strings.Contains(stderr.String(), "agentjail: the run ended: wall limit 1s reached (exit 124)") {
				t.Errorf("stderr, a pipe of its own, lacks the ending:\n%s", stderr.String())
			}
		})
	}
}

// TestSlowReaderIsWaitedFor: a reader of agentjail's stdout that is slow
// but keeps taking bytes (16 KiB a second, so the 700 kB take 43 s, and
// one write of agentjail's, up to 1 MiB, would outlast the 30 s stall
// limit) is never given up on: every byte arrives.
func TestSlowReaderIsWaitedFor(t *testing.T) {
	jailed(t)
	const size = 700_000
	rp := recordPath(t)
	cmd := exec.Command(agentjail, "run", "--record", rp, "--", "head", "-c", "700000", "/dev/zero")
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin"}, "/"
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// A deadline: an agentjail that never closes its stdout must fail the
	// test (got falls short), not hang it.
	deadline := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	got := 0
	buf := make([]byte, 8<<10)
	for {
		n, err := out.Read(buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(500 * time.Millisecond) // the slow reader itself, not a synchronisation
	}
	cmd.Wait()
	if got != size {
		t.Errorf("the reader got %d bytes of %d", got, size)
	}
	rec := readRecord(t, rp, 0)
	if w := strings.Join(rec.Warnings, "\n"); strings.Contains(w, "stopped taking") {
		t.Errorf("a reader that kept reading was given up on:\n%s", w)
	}
}

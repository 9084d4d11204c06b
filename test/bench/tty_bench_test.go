package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// operatorTerminal opens a pty pair: the slave is the terminal a command
// runs on (its controlling terminal and 0, 1, 2), the master the test's
// side of it.
func operatorTerminal(b *testing.B) (master, slave *os.File) {
	b.Helper()
	// Non-blocking, so that os.NewFile makes a pollable file whose reads
	// honour deadlines; ioctls on the raw descriptor (Fd would undo that).
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		b.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		b.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		b.Fatal(err)
	}
	unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		b.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), slave
}

// onTerminal starts argv on a new terminal, as a shell would (a session of
// its own, the terminal its controlling one).
func onTerminal(b *testing.B, argv ...string) (*exec.Cmd, *os.File) {
	b.Helper()
	master, slave := operatorTerminal(b)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"}, "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	slave.Close()
	return cmd, master
}

// readUntil reads the master until it has shown want.
func readUntil(m *os.File, want []byte, seen *[]byte) error {
	buf := make([]byte, 4096)
	for !bytes.Contains(*seen, want) {
		m.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := m.Read(buf)
		*seen = append(*seen, buf[:n]...)
		if err != nil {
			return fmt.Errorf("waiting for %q: %w (the terminal showed %q)", want, err, *seen)
		}
	}
	return nil
}

// BenchmarkKeystrokeEcho: a key typed on the operator's terminal and its
// echo back, for `cat` run on that terminal directly (the bare pty: the
// line discipline echoes) against `agentjail run -- cat`, where the key
// passes agentjail into the jail's own pty, whose line discipline echoes
// it, and the echo passes agentjail back out (the output filter
// included). Target: adds < 1 ms.
func BenchmarkKeystrokeEcho(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	keys := samples(300)
	measure := func(argv ...string) []time.Duration {
		cmd, m := onTerminal(b, argv...)
		defer func() { cmd.Process.Kill(); cmd.Wait(); m.Close() }()
		var seen []byte
		if argv[0] == agentjail {
			// Keys typed before agentjail has made the terminal raw would
			// be echoed by the terminal itself (the master's TCGETS reads
			// the slave's modes).
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				raw := false
				if rc, err := m.SyscallConn(); err == nil { // not Fd, which would make m blocking
					rc.Control(func(fd uintptr) {
						t, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
						raw = err == nil && t.Lflag&unix.ECHO == 0
					})
				}
				if raw {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("agentjail did not make the terminal raw within 30 s")
				}
			}
		}
		// Once echoed, the terminal is ready (for agentjail: the jail's
		// pty attached).
		if _, err := m.WriteString("r"); err != nil {
			b.Fatal(err)
		}
		if err := readUntil(m, []byte("r"), &seen); err != nil {
			b.Fatal(err)
		}
		var d []time.Duration
		for i := range keys {
			key := []byte{byte('a' + i%26)}
			if i%64 == 63 {
				key = []byte{'\r'} // a line for cat to take, so the line discipline's buffer never fills
			}
			seen = seen[:0]
			start := time.Now()
			m.Write(key)
			want := key
			if key[0] == '\r' {
				want = []byte("\r\n")
			}
			if err := readUntil(m, want, &seen); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		return d
	}
	for range b.N {
		bare := measure("cat")
		jailed := measure(agentjail, "run", "--", "cat")
		added := median(jailed) - median(bare)
		fmt.Printf("%-28s bare pty median %.3f ms, agentjail run median %.3f ms: adds %.3f ms (p90 %.3f vs %.3f ms; n=%d; target < 1 ms)\n",
			"keystroke echo", ms2(median(bare)), ms2(median(jailed)), ms2(added), ms2(p90(bare)), ms2(p90(jailed)), keys)
		b.ReportMetric(ms2(added), "added-ms")
	}
}

func p90(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*9/10]
}

// BenchmarkTerminalThroughput: 64 MiB of a TUI's output (escape sequences,
// UTF-8 box drawing, text) printed on a terminal through a pty: `script
// -q` running cat against `agentjail run -- cat` (its pty, the output
// filter, idle tracking, head/tail capture; the launch included), both on
// a terminal whose master the benchmark reads. Target: ≥ 0.8× script's
// MB/s.
func BenchmarkTerminalThroughput(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	if _, err := exec.LookPath("script"); err != nil {
		b.Skip("no script(1)")
	}
	// Not under /tmp or /var/tmp, which the jail covers with tmpfs.
	dir, err := os.MkdirTemp("/var/lib", "agentjail-bench-tty-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	const size = 64 << 20
	line := []byte("\x1b[38;5;174m╭───\x1b[6GClaude\x1b[13GCode \x1b[1mplain\x1b[0m ascii text here, some more of it\r\n")
	data := bytes.Repeat(line, size/len(line)+1)[:size]
	file := filepath.Join(dir, "tui.out")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(argv ...string) error {
		cmd, m := onTerminal(b, argv...)
		defer m.Close()
		n, _ := io.Copy(io.Discard, m) // until EIO: the terminal's last holder is gone
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("%q: %w", argv, err)
		}
		if n < size {
			return fmt.Errorf("%q: the terminal showed %d bytes of %d", argv, n, size)
		}
		return nil
	}
	mb := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	for range b.N {
		ref, subj := compare(b, "terminal output 64 MiB", samples(11),
			"script -q -c 'cat FILE'", func() error { return run("script", "-q", "-e", "-c", "cat "+file, "/dev/null") },
			"agentjail run -- cat FILE", func() error { return run(agentjail, "run", "--", "cat", file) })
		share := mb(subj) / mb(ref)
		fmt.Printf("%-28s script %.1f MB/s, agentjail %.1f MB/s: %.3f× (target ≥ 0.8×)\n", "", mb(ref), mb(subj), share)
		b.ReportMetric(share, "x-script")
	}
}

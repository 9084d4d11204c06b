package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
)

// TestClaudeNestedSessionVariables measures why agentjail removes what an
// enclosing Claude Code session gives the commands it runs
// (policy.AlwaysUnset), with Claude Code's interactive CLI on a terminal
// (here, not jailed: the jail has no terminal of its own yet): with
// CLAUDECODE=1 it starts, answers and writes its transcript, so there is
// no nesting guard to dodge (the reason docs gave before); with
// CLAUDE_CODE_CHILD_SESSION=1, which passes the CLAUDE_CODE_* allowlist,
// it answers but writes no transcript, so a session started by
// `agentjail run` from inside Claude Code could never be resumed.
func TestClaudeNestedSessionVariables(t *testing.T) {
	jailed(t)
	bin := testutil.RequireClaude(t)
	for _, c := range []struct {
		env         string
		transcripts int
	}{
		{"CLAUDECODE=1", 1},
		{"CLAUDE_CODE_CHILD_SESSION=1", 0},
	} {
		t.Run(c.env, func(t *testing.T) {
			t.Parallel()
			srv := fakeapi.New(t, fakeapi.Text("answer-from-stand-in-42"))
			dir, config := visibleDir(t), visibleDir(t)
			key := strings.TrimPrefix(srv.Env()[1], "ANTHROPIC_API_KEY=")
			// What spares the interactive CLI its first-start dialogs.
			write(t, config, map[string]string{".claude.json": fmt.Sprintf(`{"hasCompletedOnboarding":true,"projects":{%q:{"hasTrustDialogAccepted":true}},"customApiKeyResponses":{"approved":[%q]}}`,
				dir, key[max(0, len(key)-20):])})
			cmd := exec.Command(bin)
			cmd.Dir = dir
			cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TERM=xterm-256color", "CLAUDE_CONFIG_DIR=" + config, c.env}, srv.Env()...)
			scr := startOnTerminal(t, cmd)
			scr.wait(t, "? for shortcuts", 60*time.Second)
			scr.type_(t, "hi")
			scr.wait(t, "answer-from-stand-in-42", 60*time.Second)
			scr.type_(t, "/exit")
			if code := scr.exit(t, 30*time.Second); code != 0 {
				t.Errorf("claude exited %d", code)
			}
			got, _ := filepath.Glob(filepath.Join(config, "projects", "*", "*.jsonl"))
			if len(got) != c.transcripts {
				t.Errorf("with %s claude wrote the transcripts %q, want %d", c.env, got, c.transcripts)
			}
		})
	}
}

// terminal is a process on a pseudo-terminal of the test's: what it draws
// is kept, and the test types into it.
type terminal struct {
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	raw    bytes.Buffer
}

// startOnTerminal starts cmd as uid 1000 as the leader of a new session
// whose controlling terminal is a new pty's slave (120x40).
func startOnTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: &syscall.Credential{Uid: runUID, Gid: runUID}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term := &terminal{cmd: cmd, master: master}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.raw.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return term
}

// escapes are terminal control sequences, which ink puts between words.
var escapes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[78=>]`)

// text is what was drawn, control sequences taken out.
func (s *terminal) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return escapes.ReplaceAllString(s.raw.String(), " ")
}

// wait polls until what is drawn holds what.
func (s *terminal) wait(t *testing.T, what string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(s.text(), what) {
			return
		}
	}
	text := s.text()
	t.Fatalf("%q not drawn within %v; the end of the screen:\n%s", what, d, text[max(0, len(text)-2000):])
}

// type_ types line and, once it is drawn, Enter apart (a chunk holding
// the carriage return is taken for a paste).
func (s *terminal) type_(t *testing.T, line string) {
	t.Helper()
	s.master.Write([]byte(line))
	s.wait(t, line, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // a slash command's completion menu
	s.master.Write([]byte("\r"))
}

// exit waits for the process to end and returns its exit code.
func (s *terminal) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		text := s.text()
		t.Fatalf("no exit within %v; the end of the screen:\n%s", d, text[max(0, len(text)-1500):])
		return -1
	}
}

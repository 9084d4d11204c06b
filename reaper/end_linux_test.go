package reaper

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// fakeTree counts down: each signal in kills[sig] removes one process.
type fakeTree struct {
	left int
	sent []syscall.Signal
	// dies says which signals end a process; others are ignored.
	dies map[syscall.Signal]bool
}

func (f *fakeTree) signal(sig syscall.Signal, onlyNew bool, _ func(string, ...any)) (int, error) {
	n := f.left
	if n > 0 && (!onlyNew || !slices.Contains(f.sent, sig)) {
		f.sent = append(f.sent, sig)
		if f.dies[sig] {
			f.left = 0
		}
	}
	return n, nil
}

func (f *fakeTree) describe() string { return "pid 7 (stuck) state D" }

func TestEndEscalates(t *testing.T) {
	t.Parallel()
	term, kill := syscall.SIGTERM, syscall.SIGKILL
	for _, c := range []struct {
		name  string
		tree  fakeTree
		grace time.Duration
		hurry bool
		sent  []syscall.Signal
		err   error
	}{
		{name: "nothing left", tree: fakeTree{}, sent: nil},
		{name: "SIGTERM suffices", tree: fakeTree{left: 2, dies: map[syscall.Signal]bool{term: true}}, grace: time.Hour, sent: []syscall.Signal{term}},
		{name: "SIGTERM ignored, no grace", tree: fakeTree{left: 1, dies: map[syscall.Signal]bool{kill: true}}, sent: []syscall.Signal{term, kill}},
		// An hour of grace, cut short by an operator's second signal:
		// the test would time out if the hurry were not heard.
		{name: "hurried", tree: fakeTree{left: 1, dies: map[syscall.Signal]bool{kill: true}}, grace: time.Hour, hurry: true, sent: []syscall.Signal{term, kill}},
		{name: "survives SIGKILL", tree: fakeTree{left: 1}, sent: []syscall.Signal{term, kill}, err: ErrSurvivors},
	} {
		t.Run(c.name, func(t *testing.T) {
			hurry := make(chan os.Signal, 1)
			if c.hurry {
				hurry <- syscall.SIGINT
			}
			killWait := time.Hour // the SIGKILLed die at once; a wait this long would time the test out
			if c.err != nil {
				killWait = 0
			}
			err := end(&c.tree, c.grace, killWait, hurry, nil)
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, c.err)
			}
			if !slices.Equal(c.tree.sent, c.sent) {
				t.Errorf("sent %v, want %v", c.tree.sent, c.sent)
			}
		})
	}
}

func TestSurvivorsAreNamed(t *testing.T) {
	t.Parallel()
	err := end(&fakeTree{left: 1}, 0, 0, nil, nil)
	if err == nil || err.Error() != "processes survived SIGKILL, 0s after SIGKILL: pid 7 (stuck) state D" {
		t.Errorf("error %v", err)
	}
}

// A procfs of another pid namespace lists pids that are not ours: using
// it would signal strangers.
func TestForeignProcIsRefused(t *testing.T) {
	t.Parallel()
	if os.Getpid() == 1 {
		t.Skip("as PID 1 the pid namespace is used, not procfs")
	}
	root := t.TempDir()
	if err := os.Symlink("999999999", filepath.Join(root, "self")); err != nil {
		t.Fatal(err)
	}
	if err := EndDescendants(0, root, nil, nil); !errors.Is(err, ErrForeignProc) {
		t.Errorf("got %v, want ErrForeignProc", err)
	}
}

func TestForwardedSignals(t *testing.T) {
	t.Parallel()
	got := map[syscall.Signal]bool{}
	forward, ignore := forwarded(1<<(syscall.SIGUSR1-1) | 1<<(syscall.SIGCHLD-1))
	if len(ignore) != 1 || ignore[0] != syscall.SIGUSR1 || slices.Contains(forward, os.Signal(syscall.SIGUSR1)) {
		t.Errorf("ignored at start, kept so: %v, want SIGUSR1 alone (never SIGCHLD), not forwarded", ignore)
	}
	forward, _ = forwarded(0)
	for _, s := range forward {
		got[s.(syscall.Signal)] = true
	}
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGABRT, syscall.SIGALRM, 34, 64} {
		if !got[s] && !signal.Ignored(s) {
			t.Errorf("%v is not forwarded", s)
		}
	}
	for _, s := range []syscall.Signal{syscall.SIGCHLD, syscall.SIGURG, syscall.SIGKILL, syscall.SIGSTOP,
		syscall.SIGTTIN, syscall.SIGTTOU, 32, 33} {
		if got[s] {
			t.Errorf("%v is forwarded", s)
		}
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ws   syscall.WaitStatus
		want int
	}{
		{0, 0},
		{1 << 8, 1},
		{255 << 8, 255},
		{syscall.WaitStatus(syscall.SIGKILL), 137},
		{syscall.WaitStatus(syscall.SIGSEGV) | 0x80, 139}, // core dumped
		{syscall.WaitStatus(syscall.SIGTERM), 143},
	} {
		if got := ExitCode(c.ws); got != c.want {
			t.Errorf("ExitCode(%#x) = %d, want %d", uint32(c.ws), got, c.want)
		}
	}
}

// Package integration holds black-box tests of the built agentjail binary
// with real bubblewrap, like bubblewrap's and tini's own suites. Tests that
// need root or bwrap skip elsewhere and run in `make test` (as root).
package integration

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
)

// agentjail is the binary under test, built once by TestMain into a
// directory every user can read.
var agentjail string

// runUID is the unprivileged run user the tests jail agents as. A uid
// without a passwd entry works too, so this needs no user account.
const runUID = 1000

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentjail-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	if agentjail, err = testutil.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	if d, ok := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); ok && d > 3*time.Minute {
		// Before go test's timeout kills the package (it prints only
		// goroutines): every process the tests left, and where each waits.
		time.AfterFunc(d-time.Minute, func() {
			fmt.Fprintf(os.Stderr, "a minute before the timeout, the tests' processes:\n%s", stuck(os.Getpid()))
		})
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished agentjail invocation.
type result struct {
	stdout, stderr string
	code           int
}

// invocation configures a run of the binary.
type invocation struct {
	env   []string // added to a minimal environment
	dir   string
	stdin string
	cred  *syscall.Credential
	// wrap runs agentjail under this command line (agentjail and its
	// arguments are appended), as the caller's own sandbox or container.
	wrap []string
	// bin is the agentjail binary run, the one built for the tests when
	// empty (an install of its own, say).
	bin string
}

// aj runs agentjail with args and returns what it printed and its exit
// code. It fails the test if agentjail does not finish within a minute.
func aj(t *testing.T, args ...string) result {
	t.Helper()
	return invocation{}.run(t, args...)
}

func (inv invocation) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := cmp.Or(inv.bin, agentjail)
	cmd := exec.CommandContext(ctx, bin, args...)
	if len(inv.wrap) > 0 {
		cmd = exec.CommandContext(ctx, inv.wrap[0], append(append(inv.wrap[1:], bin), args...)...)
	}
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, inv.env...)
	cmd.Dir = inv.dir
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Stdin = strings.NewReader(inv.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if inv.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: inv.cred}
	}
	// At the minute: what agentjail's processes wait on, then the kill;
	// what outlives it cannot hold the output for ever.
	var snapshot string
	cmd.Cancel = func() error {
		snapshot = stuck(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agentjail %q did not finish in a minute; stderr:\n%s\nits processes then:\n%s", args, stderr.String(), snapshot)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("agentjail %q: %v", args, err)
		}
		code = ee.ExitCode()
	}
	if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
		t.Errorf("agentjail %q panicked:\n%s", args, stderr.String())
	}
	return result{stdout.String(), stderr.String(), code}
}

// jailed needs root and bubblewrap: the integration tests of the jail.
func jailed(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	t.Parallel()
}

// jailedAlone is jailed for a test that must not overlap the others: every
// `agentjail init` and `agentjail run` sweeps /run/agentjail/runs, so a
// concurrent test's init or run could take this test's dead run first. Go runs the non-parallel tests of
// a package one at a time, before the parallel ones start.
func jailedAlone(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
}

// workspace returns an empty directory owned by the run user, whose parents
// the run user can traverse.
func workspace(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	chownR(t, d, runUID)
	return d
}

// visibleDir is like workspace but outside /tmp and /var/tmp, which the
// tier profiles cover with their own tmpfs: the jail sees it read-only.
func visibleDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/lib", "agentjail-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o755)
	chownR(t, d, runUID)
	return d
}

// write creates files (path -> content) under root, owned by the run user.
// A path ending in / is a directory.
func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	chownR(t, root, runUID)
}

func chownR(t *testing.T, root string, uid int) {
	t.Helper()
	if os.Getuid() != 0 {
		return // only root can give files away; such tests skip anyway
	}
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeHash hashes every path, mode and content under root, so a test can
// assert that a run changed nothing on the host.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", strings.TrimPrefix(p, root), fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// copyExecutable copies the executable src to dst, mode 0755, by cp: a
// file this process had open for writing could be held by a child
// another test forks meanwhile, and then not start (ETXTBSY, golang/go
// issue 22315; seen once under -count=8).
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v %s", src, dst, err, out)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
}

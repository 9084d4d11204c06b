package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/doctor"
	"github.com/agentjail/agentjail/internal/testutil"
)

// TestInitHandsOver: `agentjail init` becomes agentjail-init when that is
// installed next to agentjail — PID 1 is then the small binary, with the
// flags agentjail parsed, environment twins included — and runs init
// itself, saying why under --verbose, when agentjail-init is missing or
// could have been planted or swapped by someone else: writable by others,
// a symlink (here to /bin/false, which would end the container at once),
// in a directory others can write.
func TestInitHandsOver(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	installed := filepath.Dir(agentjail)
	alone := binDir(t, false)
	planted := binDir(t, true)
	os.Chmod(filepath.Join(planted, "agentjail-init"), 0o777)
	linked := binDir(t, false)
	if err := os.Symlink("/bin/false", filepath.Join(linked, "agentjail-init")); err != nil {
		t.Fatal(err)
	}
	open := binDir(t, true)
	os.Chmod(open, 0o777)
	for _, c := range []struct {
		name, dir, comm, stderr string
	}{
		{"installed", installed, "agentjail-init", "agentjail: init: started /usr/bin/sh as pid "},
		{"missing", alone, "agentjail", "agentjail: init: no agentjail-init next to agentjail"},
		{"writable by others", planted, "agentjail", "agentjail-init is writable by others (mode 0777); running in agentjail itself"},
		{"symlink", linked, "agentjail", "agentjail-init is a symlink; install the binary itself; running in agentjail itself"},
		{"directory writable by others", open, "agentjail", "mode 0777: someone other than root or agentjail's owner could put an agentjail-init there; running in agentjail itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A deadline: a broken hand-off must fail the test, not hang it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "unshare", "-fp", "--mount-proc", filepath.Join(c.dir, "agentjail"), "init", "--", "sh", "-c", "cat /proc/1/comm; exit 7")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "AGENTJAIL_INIT_VERBOSE=1"}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
				t.Fatalf("exit: %v, want 7; stderr:\n%s", err, stderr.String())
			}
			if got := strings.TrimSpace(string(out)); got != c.comm {
				t.Errorf("PID 1 is %q, want %q; stderr:\n%s", got, c.comm, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, stderr.String())
			}
			// doctor says the same of it.
			doc := exec.CommandContext(ctx, filepath.Join(c.dir, "agentjail"), "doctor", "--json")
			doc.Env = cmd.Env
			out, _ = doc.Output()
			var rep doctor.Report
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("doctor --json: %v\n%s", err, out)
			}
			ic, want := check(t, rep, "init"), doctor.Pass
			if c.comm == "agentjail" {
				want = doctor.Warn
			}
			if ic.Status != want || want == doctor.Warn && !strings.Contains(ic.Cause, strings.TrimPrefix(strings.TrimSuffix(c.stderr, "; running in agentjail itself"), "agentjail: init: ")) {
				t.Errorf("doctor's init check is %s, want %s naming the cause: %+v", ic.Status, want, ic)
			}
		})
	}
}

// binDir copies agentjail into a directory of its own, with agentjail-init
// next to it when withInit is set.
func binDir(t *testing.T, withInit bool) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	names := []string{"agentjail"}
	if withInit {
		names = append(names, "agentjail-init")
	}
	for _, name := range names {
		copyExecutable(t, filepath.Join(filepath.Dir(agentjail), name), filepath.Join(dir, name))
	}
	return dir
}

package packaging

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
)

// TestMakeDemo: `make demo` installs what agentjail needs to build and run
// and nothing the tests drive, then really builds agentjail and jails a
// shell on tier1, whose lines from inside the jail show what was allowed
// and what refused.
func TestMakeDemo(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "agentjail")

	plan, err := exec.Command("make", "-C", repo, "-n", "demo", "BIN="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, plan)
	}
	var installs [][]string
	for _, line := range strings.Split(string(plan), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], ".ci/provision") {
			installs = append(installs, f[1:])
		}
	}
	want := []string{"bubblewrap", "libseccomp-dev", "gcc", "libc6-dev", "pkg-config", "ca-certificates"}
	if len(installs) != 1 || !slices.Equal(installs[0], want) {
		t.Errorf("make demo provisions %q, want exactly once %q:\n%s", installs, want, plan)
	}

	out, err := exec.Command("make", "-C", repo, "demo", "BIN="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	for _, line := range []string{
		"packages: all 6 installed, nothing to install",
		"agent: running as nobody, capabilities: 0000000000000000",
		"agent: wrote results.txt (allowed: writable root)",
		"agent: overwriting .env was refused",
		"agent: writing /etc was refused",
		"agent: ~/.ssh is not there",
		"results.txt: result of the run",
		".env:        API_KEY=do-not-touch",
		"demo ok: the protected file is unchanged and the allowed write landed",
	} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("make demo's output lacks %q:\n%s", line, out)
		}
	}
}

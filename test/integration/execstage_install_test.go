package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
)

// TestExecStageInstalls: the jail's exec stage is the agentjail-exec
// installed beside agentjail; where there is none (agentjail built alone)
// it is agentjail itself, silently; where one is there but is not what
// agentjail's owner installed (a symlink, writable by others), agentjail
// itself too, and the run says why on stderr and in its record. Every
// way, the agent's exit code and an exec failure (127, 126) come back
// exactly. The bound stage is read off `agentjail render`.
func TestExecStageInstalls(t *testing.T) {
	testutil.RequireRoot(t)
	jailed(t)
	install := func(t *testing.T, stage func(dir string)) string {
		t.Helper()
		// Root's, 0755, where the run user can read what it binds (no
		// copy under /run/agentjail/bin, so render shows the source).
		dir, err := os.MkdirTemp("/var/lib", "agentjail-it-bin-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		copyExecutable(t, agentjail, filepath.Join(dir, "agentjail"))
		if stage != nil {
			stage(dir)
		}
		return dir
	}
	copyStage := func(mode os.FileMode) func(string) {
		return func(dir string) {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(agentjail), "agentjail-exec"))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "agentjail-exec")
			if err := os.WriteFile(p, data, mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, mode) // past the umask
		}
	}
	for _, c := range []struct {
		name  string
		stage func(dir string)
		bound string // the file bound as the stage, in the install directory
		warn  string // "": none
	}{
		{"installed", copyStage(0o755), "agentjail-exec", ""},
		{"missing", nil, "agentjail", ""},
		{"writable by others", copyStage(0o777), "agentjail", "not using agentjail-exec: DIR/agentjail-exec is writable by others (mode 0777); the exec stage is agentjail itself"},
		{"symlink", func(dir string) { os.Symlink("/bin/true", filepath.Join(dir, "agentjail-exec")) },
			"agentjail", "not using agentjail-exec: DIR/agentjail-exec is a symlink; install the binary itself; the exec stage is agentjail itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := install(t, c.stage)
			warn := strings.ReplaceAll(c.warn, "DIR", dir)
			run := invocation{bin: filepath.Join(dir, "agentjail")}.run
			r := run(t, "render", "--user", "1000", "--", "true")
			if want := "--ro-bind " + filepath.Join(dir, c.bound) + " /dev/.agentjail-exec "; !strings.Contains(r.stdout, want) {
				t.Errorf("render does not bind %s as the stage:\n%s", c.bound, r.stdout)
			}
			if warn == "" && strings.Contains(r.stderr, "warning") || warn != "" && !strings.Contains(r.stderr, "agentjail: warning: "+warn+"\n") {
				t.Errorf("render's stderr, want warning %q:\n%s", warn, r.stderr)
			}
			rp := recordPath(t)
			r = run(t, "run", "--user", "1000", "--record", rp, "--", "sh", "-c", "exit 3")
			wantCode(t, r, 3)
			if rec := readRecord(t, rp, 3); warn != "" && !strings.Contains(strings.Join(rec.Warnings, "\n"), warn) {
				t.Errorf("the record's warnings lack %q: %q", warn, rec.Warnings)
			}
			rp = recordPath(t)
			r = run(t, "run", "--user", "1000", "--record", rp, "--", "no-such-command-anywhere")
			wantCode(t, r, 127)
			if rec := readRecord(t, rp, 127); rec.ExecFailure == nil || rec.ExecFailure.Path != "no-such-command-anywhere" {
				t.Errorf("exec_failure %+v", rec.ExecFailure)
			}
			r = run(t, "run", "--user", "1000", "--", "/etc/hostname")
			wantCode(t, r, 126)
		})
	}
}

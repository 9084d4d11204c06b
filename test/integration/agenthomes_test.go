package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTier3CopiesUnreadableCredentials: a credential the run user cannot
// read (root's 0600 ssh key) appears in the tier3 agent's home as a copy it
// owns, read-only; nothing is written back and the copy is gone after the
// run.
func TestTier3CopiesUnreadableCredentials(t *testing.T) {
	jailed(t)
	home := visibleDir(t)
	os.Chown(home, 0, 0)
	key := filepath.Join(home, ".ssh", "id_test")
	os.MkdirAll(filepath.Dir(key), 0o700)
	if err := os.WriteFile(key, []byte("PRIVATE KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := recordPath(t)
	r := invocation{env: []string{"HOME=" + home}}.run(t, "run", "--profile", "tier3", "--user", "1000", "--record", rec, "--",
		"sh", "-c", `cat ~/.ssh/id_test; stat -c '%u %a' ~/.ssh/id_test; echo tampered >> ~/.ssh/id_test || echo refused`)
	wantCode(t, r, 0)
	if r.stdout != "PRIVATE KEY\n1000 600\nrefused\n" || !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(key); string(b) != "PRIVATE KEY\n" {
		t.Errorf("the operator's key changed: %q", b)
	}
	got := readRecord(t, rec, 0)
	if _, err := os.Stat(filepath.Join("/run/agentjail", got.RunID)); err == nil {
		t.Errorf("the run's agent-homes directory is left")
	}
}

// TestClaudeDirIsCapped: the run's Claude Code directory, on the host
// while the run lasts, is capped as the private home is (a tmpfs of the
// home's size) when agentjail runs as root; run by another user it cannot
// mount one, and the record says so.
func TestClaudeDirIsCapped(t *testing.T) {
	jailed(t)
	rec := recordPath(t)
	r := aj(t, "run", "--profile", "tier1", "--user", "1000", "--record", rec, "--", "sh", "-c",
		`stat -f -c %T "$CLAUDE_CONFIG_DIR"; df -B1 --output=size "$CLAUDE_CONFIG_DIR" | tail -n 1; touch "$CLAUDE_CONFIG_DIR/written" && echo writable`)
	wantCode(t, r, 0)
	if got := strings.Fields(r.stdout); len(got) != 3 || got[0] != "tmpfs" || got[1] != "536870912" || got[2] != "writable" {
		t.Errorf("~/.claude: %q; want a writable tmpfs of the tier's 512 MiB home size", r.stdout)
	}
	asRoot := readRecord(t, rec, 0)
	wantDegradationsPrinted(t, r.stderr, asRoot)
	for _, d := range asRoot.Degradations {
		if d.What == "staging.size" {
			t.Errorf("a run as root could not cap the directory: %s", d.Detail)
		}
	}

	dir := workspace(t) // as uid 1000, agentjail keeps its run directory in $XDG_RUNTIME_DIR
	rec = filepath.Join(dir, "record.json")
	r = invocation{env: []string{"HOME=" + dir, "XDG_RUNTIME_DIR=" + dir}, cred: &syscall.Credential{Uid: runUID, Gid: runUID}}.run(t,
		"run", "--profile", "tier1", "--record", rec, "--", "true")
	wantCode(t, r, 0)
	got := readRecord(t, rec, 0)
	wantDegradationsPrinted(t, r.stderr, got)
	found := false
	for _, d := range got.Degradations {
		found = found || d.What == "staging.size" && strings.Contains(d.Detail, "only root can mount one")
	}
	if !found {
		t.Errorf("a run by uid 1000 does not record the uncapped directory: %v", got.Degradations)
	}
}

package integration

import (
	"os"
	"path/filepath"
	"strings"
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
		t.Errorf("the run's staging directory is left")
	}
}

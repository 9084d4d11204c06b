package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCopiedLoginsRedacted: the operator's logins that agentjail copies in
// for the agents (Claude Code's access token, Codex's API key) are
// redacted from the record's excerpts, as a key passed in the environment
// is: an agent that prints its login does not put the operator's
// credential into every copy of the record.
func TestCopiedLoginsRedacted(t *testing.T) {
	jailed(t)
	home, _ := operatorLogin(t, "sk-ant-oat01-operator-copied", time.Now().Add(8*time.Hour))
	auth := filepath.Join(home, ".codex", "auth.json")
	os.MkdirAll(filepath.Dir(auth), 0o700)
	if err := os.WriteFile(auth, []byte(`{"auth_mode":"apikey","OPENAI_API_KEY":"sk-operator-codex-copied"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := recordPath(t)
	r := invocation{env: []string{"HOME=" + home}}.run(t, "run", "--profile", "tier1", "--net", "host", "--user", "1000", "--record", rec, "--", // logins are copied into the jail only with the host's network
		"sh", "-c", `cat "$CLAUDE_CONFIG_DIR/.credentials.json" "$CODEX_HOME/auth.json"`)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "sk-ant-oat01-operator-copied") || !strings.Contains(r.stdout, "sk-operator-codex-copied") {
		t.Fatalf("the jail did not get both logins:\n%s", r.stdout)
	}
	got := readRecord(t, rec, r.code)
	for _, s := range []string{got.Excerpt.Stdout.Head, got.Excerpt.Stdout.Tail} {
		if strings.Contains(s, "sk-ant-oat01-operator-copied") || strings.Contains(s, "sk-operator-codex-copied") {
			t.Errorf("the record's excerpt shows a copied login: %q", s)
		}
	}
	if !strings.Contains(got.Excerpt.Stdout.Head+got.Excerpt.Stdout.Tail, "[redacted]") {
		t.Errorf("nothing was redacted: %+v", got.Excerpt.Stdout)
	}
}

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpsLoopAPIKeyFile: the ops loop takes the API key from
// ANTHROPIC_API_KEY_FILE, as the Kubernetes manifests mount it (a Secret,
// read-only), and hands it to agentjail run in the environment (agentjail
// passes ANTHROPIC_* into the jail). agentjail is a stand-in that records
// its environment; one cycle, no repositories.
func TestOpsLoopAPIKeyFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("the ops loop needs node (installed with Claude Code)")
	}
	dir := t.TempDir()
	key, seen, args := filepath.Join(dir, "api-key"), filepath.Join(dir, "seen-env"), filepath.Join(dir, "seen-args")
	stub := filepath.Join(dir, "agentjail")
	for path, content := range map[string]string{
		key:  "sk-from-the-secret\n",
		stub: "#!/bin/sh\nenv >\"" + seen + "\"\nprintf '%s\\n' \"$@\" >>\"" + args + "\"\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"state", "repos", "results"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(keyFile string) (string, error) {
		cmd := exec.Command(filepath.Join(repo, "examples/claude-ops/ops-loop.sh"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AGENTJAIL=" + stub, "CLAUDE=claude",
			"CLAUDEOPS_CYCLES=1", "CLAUDEOPS_INTERVAL=0", "CLAUDEOPS_STATE_DIR=" + filepath.Join(dir, "state"),
			"CLAUDEOPS_REPOS_DIR=" + filepath.Join(dir, "repos"), "CLAUDEOPS_RESULTS_DIR=" + filepath.Join(dir, "results"),
			"ANTHROPIC_API_KEY_FILE=" + keyFile, "CLAUDEOPS_TIER1_ALLOW_NET=mcp.internal.example *.svc.example:8443"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(key); err != nil {
		t.Fatalf("ops loop: %v\n%s", err, out)
	}
	env, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\n"+string(env), "\nANTHROPIC_API_KEY=sk-from-the-secret\n") {
		t.Errorf("agentjail run did not get the key from the file:\n%s", env)
	}
	// CLAUDEOPS_TIER1_ALLOW_NET: one --allow-net each, not globbed.
	if a, _ := os.ReadFile(args); !strings.Contains(string(a), "\n--allow-net\nmcp.internal.example\n--allow-net\n*.svc.example:8443\n") {
		t.Errorf("agentjail run's arguments lack the tier's --allow-net entries:\n%s", a)
	}
	out, err := run(filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(out, "cannot read ANTHROPIC_API_KEY_FILE") {
		t.Errorf("an unreadable key file did not stop the loop: %v\n%s", err, out)
	}
}

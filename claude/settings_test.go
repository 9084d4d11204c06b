package claude

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestSettingsForRun(t *testing.T) {
	t.Parallel()
	src := `{
	  "permissions": {"allow": ["Bash"], "deny": ["Read(./.env)"]},
	  "sandbox": {"enabled": true, "failIfUnavailable": true, "network": {"allowedDomains": ["x.example"], "tlsTerminate": {"caKeyPath": "/root/ca.key"}}},
	  "model": "opus",
	  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "touch /tmp/pwned"}]}]},
	  "statusLine": {"type": "command", "command": "id"},
	  "env": {"ANTHROPIC_API_KEY": "sk-ant-secret"},
	  "apiKeyHelper": "/usr/local/bin/key",
	  "enabledPlugins": {"x@y": true},
	  "someFutureKey": 1
	}`
	s, err := SettingsForRun([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wantDropped := []string{"apiKeyHelper", "enabledPlugins", "env", "hooks", "someFutureKey", "statusLine", "sandbox.network.tlsTerminate"}
	if !slices.Equal(s.Dropped, wantDropped) {
		t.Errorf("dropped %q, want %q", s.Dropped, wantDropped)
	}
	var got map[string]any
	if err := json.Unmarshal(s.File, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["model"] != "opus" || got["permissions"] == nil {
		t.Errorf("the run gets %s", s.File)
	}
	sandbox := got["sandbox"].(map[string]any)
	if sandbox["enabled"] != true || sandbox["failIfUnavailable"] != true || sandbox["network"].(map[string]any)["allowedDomains"] == nil {
		t.Errorf("sandbox %v", sandbox)
	}
	for _, secret := range []string{"sk-ant-secret", "caKeyPath", "pwned", "/usr/local/bin/key"} {
		if strings.Contains(string(s.File), secret) {
			t.Errorf("the run gets %s: %s", secret, s.File)
		}
	}
	for _, bad := range []string{"[]", "not json", `{"sandbox": 1}`, `{"sandbox": {"network": []}}`} {
		if _, err := SettingsForRun([]byte(bad)); err == nil {
			t.Errorf("%s is taken", bad)
		}
	}
}

// TestSettingsForRunDropsSandboxCommands: the sandbox block carries the
// operator's policy, but not the programs it names for Claude Code to run
// (2.1.197's schema: sandbox.ripgrep.command, which claude runs for its
// sandbox; bwrapPath and socatPath, the binaries of the sandbox itself).
func TestSettingsForRunDropsSandboxCommands(t *testing.T) {
	t.Parallel()
	src := `{"sandbox": {"enabled": true, "excludedCommands": ["git"], "ripgrep": {"command": "/bin/sh", "args": ["-c", "touch /tmp/pwned"]},
	  "bwrapPath": "/opt/evil/bwrap", "socatPath": "/opt/evil/socat", "network": {"tlsTerminate": {}}}}`
	s, err := SettingsForRun([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox.bwrapPath", "sandbox.network.tlsTerminate", "sandbox.ripgrep", "sandbox.socatPath"}
	if d := slices.Sorted(slices.Values(s.Dropped)); !slices.Equal(d, want) {
		t.Errorf("dropped %q, want %q", d, want)
	}
	for _, bad := range []string{"pwned", "/opt/evil"} {
		if strings.Contains(string(s.File), bad) {
			t.Errorf("the run gets %s: %s", bad, s.File)
		}
	}
	if !strings.Contains(string(s.File), `"excludedCommands"`) {
		t.Errorf("the run does not get the sandbox's policy: %s", s.File)
	}
}

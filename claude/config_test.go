package claude

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigForRun: a run gets the onboarding and trust state of the
// operator's ~/.claude.json and nothing else: no API key, no MCP server's
// secrets, no prompt history.
func TestConfigForRun(t *testing.T) {
	t.Parallel()
	src := `{"numStartups":7,"hasCompletedOnboarding":true,"lastOnboardingVersion":"2.1.197","theme":"dark","userID":"u-secret",
"primaryApiKey":"sk-ant-api03-secret","customApiKeyResponses":{"approved":["api03-secret-end"],"rejected":[]},
"oauthAccount":{"accountUuid":"a1","emailAddress":"op@example.org"},
"mcpServers":{"db":{"command":"db-mcp","env":{"DB_PASSWORD":"mcp-secret"}}},
"projects":{"/srv/proj":{"hasTrustDialogAccepted":true,"projectOnboardingSeenCount":2,"history":[{"display":"deploy with password hunter2"}],
"mcpServers":{"x":{"type":"http","headers":{"Authorization":"Bearer header-secret"}}},"allowedTools":["Bash"]},
"/srv/other":{"history":[{"display":"other prompt"}]}}}`
	got, err := ConfigForRun([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"secret", "hunter2", "other prompt", "numStartups", "allowedTools", "/srv/other"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("the run's config holds %q:\n%s", secret, got)
		}
	}
	var cfg struct {
		HasCompletedOnboarding bool
		LastOnboardingVersion  string
		Theme                  string
		OAuthAccount           map[string]string `json:"oauthAccount"`
		Projects               map[string]map[string]any
	}
	if err := json.Unmarshal(got, &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.HasCompletedOnboarding || cfg.LastOnboardingVersion != "2.1.197" || cfg.Theme != "dark" || cfg.OAuthAccount["accountUuid"] != "a1" ||
		len(cfg.Projects) != 1 || cfg.Projects["/srv/proj"]["hasTrustDialogAccepted"] != true || cfg.Projects["/srv/proj"]["projectOnboardingSeenCount"] != 2.0 {
		t.Errorf("the run's config lacks what it should keep:\n%s", got)
	}
	for _, bad := range []string{`[1]`, `not json`, `{"projects":[1]}`} {
		if _, err := ConfigForRun([]byte(bad)); err == nil {
			t.Errorf("%s: taken", bad)
		}
	}
}

// TestConfigForRunCarriesTheApprovalOfTheRunsKey: the operator's approval
// of the API key the run gets comes along (claude would ask again
// otherwise); the ends of other keys do not, and nothing without a key.
func TestConfigForRunCarriesTheApprovalOfTheRunsKey(t *testing.T) {
	t.Parallel()
	key := "sk-ant-api03-0123456789abcdefghijKLMN"
	end := APIKeyEnd([]string{"PATH=/bin", "ANTHROPIC_API_KEY=" + key})
	if end != key[len(key)-20:] || APIKeyEnd([]string{"ANTHROPIC_API_KEY="}) != "" {
		t.Fatalf("APIKeyEnd = %q", end)
	}
	src := `{"customApiKeyResponses":{"approved":["other-key-end-000000","` + end + `"],"rejected":["rejected-end"]}}`
	for _, c := range []struct {
		keyEnd []string
		want   string
	}{
		{[]string{end}, `{"customApiKeyResponses":{"approved":["` + end + `"]}}`},
		{[]string{"not-approved-end-000"}, `{}`},
		{[]string{""}, `{}`},
		{nil, `{}`},
	} {
		got, err := ConfigForRun([]byte(src), c.keyEnd...)
		if err != nil || string(got) != c.want {
			t.Errorf("key end %q: %s, %v; want %s", c.keyEnd, got, err, c.want)
		}
	}
}

package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLoginForRun: the run gets the access token and what claude reads
// beside it, never the refresh token, another login kept in the file, or
// a field agentjail does not know; a file without a login, or with one
// that expired, gives nothing.
func TestLoginForRun(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	login := func(expires time.Time) string {
		return fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-op","refreshToken":"sk-ant-ort01-op","expiresAt":%d,`+
			`"scopes":["user:inference","user:profile"],"subscriptionType":"max","rateLimitTier":null,"clientId":"x","extra":{"refreshToken":"sk-ant-ort01-nested"}},`+
			`"mcpOAuth":{"srv":{"accessToken":"a","refreshToken":"sk-ant-ort01-mcp","clientSecret":"s"}},"refreshToken":"sk-ant-ort01-top"}`, expires.UnixMilli())
	}
	in8h := now.Add(8 * time.Hour)

	l, err := LoginForRun([]byte(login(in8h)), now, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-op","expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`, in8h.UnixMilli())
	if string(l.File) != want || !l.Expires.Equal(in8h) || l.Warning != "" {
		t.Errorf("LoginForRun = %s, expires %v, warning %q;\nwant %s", l.File, l.Expires, l.Warning, want)
	}
	if strings.Contains(string(l.File), "ort01") || strings.Contains(string(l.File), "clientSecret") {
		t.Errorf("the run gets a refresh token or secret: %s", l.File)
	}
	var back struct {
		OAuth map[string]json.RawMessage `json:"claudeAiOauth"`
	}
	if err := json.Unmarshal(l.File, &back); err != nil || len(back.OAuth) != 4 {
		t.Errorf("the run's file does not parse as a login of 4 fields: %v %s", err, l.File)
	}

	// No expiry given: the run gets it, nothing to check.
	l, err = LoginForRun([]byte(`{"claudeAiOauth":{"accessToken":"tok"}}`), now, time.Hour)
	if err != nil || string(l.File) != `{"claudeAiOauth":{"accessToken":"tok"}}` || !l.Expires.IsZero() || l.Warning != "" {
		t.Errorf("a login without expiresAt: %s %v %q %v", l.File, l.Expires, l.Warning, err)
	}

	// Expiring within the wall limit: the run gets it, with a warning; with no
	// wall limit, without.
	in5m := now.Add(5 * time.Minute)
	l, err = LoginForRun([]byte(login(in5m)), now, 10*time.Minute)
	if err != nil || l.File == nil || l.Warning != "its access token expires at 2027-01-15T08:05:00Z, 5m0s before the run's wall limit (10m0s), and the jail gets no refresh token to renew it: claude's model calls then fail" {
		t.Errorf("a login expiring before the wall limit: %q %v", l.Warning, err)
	}
	if l, err = LoginForRun([]byte(login(in5m)), now, 0); err != nil || l.Warning != "" {
		t.Errorf("without a wall limit: %q %v", l.Warning, err)
	}

	for _, c := range []struct {
		name, src string
		want      error
		msg       string
	}{
		{"expired", login(now.Add(-time.Minute)), ErrLoginExpired, "holds a Claude Code login that expired at 2027-01-15T07:59:00Z"},
		{"expiring now", login(now), ErrLoginExpired, "holds a Claude Code login that expired at 2027-01-15T08:00:00Z"},
		{"no login", `{"mcpOAuth":{}}`, ErrNoLogin, "holds no Claude Code login (no claudeAiOauth.accessToken)"},
		{"empty token", `{"claudeAiOauth":{"accessToken":""}}`, ErrNoLogin, "holds no Claude Code login (no claudeAiOauth.accessToken)"},
		{"not JSON", "\x00", ErrNoLogin, "holds no Claude Code login (not JSON: invalid character"},
		{"wrong type", `{"claudeAiOauth":{"accessToken":"t","expiresAt":"soon"}}`, ErrNoLogin, "holds no Claude Code login (its claudeAiOauth.expiresAt is a string, not what claude writes there)"},
		{"empty", "", ErrNoLogin, "holds no Claude Code login (not JSON: unexpected end of JSON input)"},
	} {
		l, err := LoginForRun([]byte(c.src), now, time.Hour)
		if !errors.Is(err, c.want) || !strings.HasPrefix(fmt.Sprint(err), c.msg) || l.File != nil {
			t.Errorf("%s: LoginForRun = %s, %v; want %v (%q)", c.name, l.File, err, c.want, c.msg)
		}
	}
}

func TestEnvLogin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, ""},
		{[]string{"PATH=/bin", "ANTHROPIC_API_KEY="}, ""},
		{[]string{"ANTHROPIC_BASE_URL=http://x", "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR=3"}, ""},
		{[]string{"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x"}, "CLAUDE_CODE_OAUTH_TOKEN"},
		{[]string{"ANTHROPIC_AUTH_TOKEN=t", "ANTHROPIC_API_KEY=k"}, "ANTHROPIC_API_KEY"},
	} {
		if got := EnvLogin(c.env); got != c.want {
			t.Errorf("EnvLogin(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}

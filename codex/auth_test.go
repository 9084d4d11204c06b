package codex

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// jwt makes an unsigned token whose payload says exp.
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d,"sub":"u"}`, exp.Unix()))) + ".sig"
}

func TestAuthForRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	chatgpt := func(exp time.Time) string {
		return fmt.Sprintf(`{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":"id.x.y","access_token":%q,"refresh_token":"rt-secret","account_id":"acc"},"last_refresh":"2026-11-25T10:00:00Z","personal_access_token":"pat-secret","agent_identity":{"k":"v"}}`, jwt(exp))
	}
	l, err := AuthForRun([]byte(chatgpt(now.Add(8*time.Hour))), now, time.Hour)
	if err != nil || l.Kind != "ChatGPT login" || !l.Expires.Equal(now.Add(8*time.Hour)) || l.Warning != "" {
		t.Fatalf("%+v %v", l, err)
	}
	var got map[string]any
	json.Unmarshal(l.File, &got)
	tok := got["tokens"].(map[string]any)
	if tok["refresh_token"] != "" || tok["access_token"] != jwt(now.Add(8*time.Hour)) || tok["account_id"] != "acc" || got["last_refresh"] == nil {
		t.Errorf("the run gets %s", l.File)
	}
	for _, secret := range []string{"rt-secret", "pat-secret", "agent_identity"} {
		if strings.Contains(string(l.File), secret) {
			t.Errorf("the run gets %s: %s", secret, l.File)
		}
	}
	if l, err := AuthForRun([]byte(chatgpt(now.Add(30*time.Minute))), now, time.Hour); err != nil || !strings.Contains(l.Warning, "before the run's wall limit") {
		t.Errorf("expiring: %+v %v", l, err)
	}
	if _, err := AuthForRun([]byte(chatgpt(now.Add(-time.Minute))), now, 0); !errors.Is(err, ErrLoginExpired) {
		t.Errorf("expired: %v", err)
	}
	l, err = AuthForRun([]byte(`{"auth_mode":"apikey","OPENAI_API_KEY":"sk-op","tokens":null,"personal_access_token":"pat"}`), now, 0)
	if err != nil || l.Kind != "API key" || string(l.File) != `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-op"}` {
		t.Errorf("api key: %s %v", l.File, err)
	}
	for _, bad := range []string{`not json`, `{}`, `{"OPENAI_API_KEY":""}`, `{"tokens":{"access_token":""}}`, `{"tokens":"x"}`} {
		if _, err := AuthForRun([]byte(bad), now, 0); !errors.Is(err, ErrNoLogin) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestEnvLogin(t *testing.T) {
	t.Parallel()
	if got := EnvLogin([]string{"OPENAI_API_KEY=", "CODEX_API_KEY=k"}); got != "CODEX_API_KEY" {
		t.Errorf("%q", got)
	}
	if got := EnvLogin([]string{"PATH=/bin"}); got != "" {
		t.Errorf("%q", got)
	}
}

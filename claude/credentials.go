package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxCredentials bounds the operator's credentials file agentjail reads: a
// real one is a few hundred bytes.
const MaxCredentials = 1 << 20

// runLogin is as much of a Claude Code login (the claudeAiOauth object
// of ~/.claude/.credentials.json) as a run gets: what claude reads to use
// the access token. The refresh token is not among it.
type runLogin struct {
	AccessToken      string   `json:"accessToken"`
	ExpiresAt        *int64   `json:"expiresAt,omitempty"` // Unix milliseconds
	Scopes           []string `json:"scopes,omitempty"`
	SubscriptionType *string  `json:"subscriptionType,omitempty"`
	RateLimitTier    *string  `json:"rateLimitTier,omitempty"`
}

// Login is the operator's Claude Code login as a run gets it.
type Login struct {
	// File is the credentials file the jail gets.
	File []byte
	// Expires is when its access token expires; zero when the operator's
	// file does not say.
	Expires time.Time
	// Warning, when set, says the access token expires before the run's
	// wall limit.
	Warning string
	// Secrets are the values in File the record must not show (the
	// access token): launch redacts them from the excerpts, as it does a
	// key passed in the environment.
	Secrets []string
}

// LoginForRun makes, from the operator's credentials file src, the one a
// run gets, at now, for a run of at most wall (0: no limit): the access
// token of its login, with what claude reads beside it (expiresAt, scopes,
// subscriptionType, rateLimitTier), and nothing else. The refresh token
// stays out: whoever holds it can mint access tokens for the operator's
// account until it is revoked, and claude rotates it when it refreshes, so
// a login refreshed in the jail would either log the operator out or have
// to be written back, letting the agent choose the operator's login (issue
// 14). So do the other logins the file may keep (MCP servers' mcpOAuth,
// with their own refresh tokens and client secrets).
//
// Claude Code 2.1.197 runs on an access token alone (measured by
// TestClaudeCopiedLogin and TestClaudeExpiredAccessToken): it uses a valid
// one and asks for no refresh; an expired one it still sends, and the
// API's 401 ends the session (exit 1, "Failed to authenticate").
//
// It fails with ErrNoLogin when src holds no login, and with
// ErrLoginExpired when its access token had expired by now; a token that
// expires before the wall limit gives a Warning.
func LoginForRun(src []byte, now time.Time, wall time.Duration) (Login, error) {
	var file struct {
		OAuth *runLogin `json:"claudeAiOauth"`
	}
	if err := json.Unmarshal(src, &file); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Login{}, fmt.Errorf("%w (its %s is a %s, not what claude writes there)", ErrNoLogin, te.Field, te.Value)
		}
		return Login{}, fmt.Errorf("%w (not JSON: %v)", ErrNoLogin, err)
	}
	if file.OAuth == nil || file.OAuth.AccessToken == "" {
		return Login{}, fmt.Errorf("%w (no claudeAiOauth.accessToken)", ErrNoLogin)
	}
	l := Login{Secrets: []string{file.OAuth.AccessToken}}
	if ms := file.OAuth.ExpiresAt; ms != nil {
		l.Expires = time.UnixMilli(*ms)
		if !l.Expires.After(now) {
			return Login{}, fmt.Errorf("%w at %s", ErrLoginExpired, l.Expires.UTC().Format(time.RFC3339))
		}
		if end := now.Add(wall); wall > 0 && l.Expires.Before(end) {
			l.Warning = fmt.Sprintf("its access token expires at %s, %s before the run's wall limit (%s), and the jail gets no refresh token to renew it: claude's model calls then fail",
				l.Expires.UTC().Format(time.RFC3339), end.Sub(l.Expires).Round(time.Second), wall)
		}
	}
	var err error
	l.File, err = json.Marshal(map[string]*runLogin{"claudeAiOauth": file.OAuth})
	return l, err
}

// envLogins are the variables that give claude a login of their own: an
// API key, a bearer token, a long-lived OAuth token (`claude setup-token`).
var envLogins = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// EnvLogin returns the first variable of env (NAME=value entries, as the
// jail gets them) that gives claude a login without a credentials file,
// "" when none does.
func EnvLogin(env []string) string {
	for _, name := range envLogins {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok && v != "" {
				return name
			}
		}
	}
	return ""
}

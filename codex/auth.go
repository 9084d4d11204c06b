package codex

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxAuth bounds the operator's auth.json agentjail reads: a real one is a
// few KiB (three JWTs).
const MaxAuth = 1 << 20

// tokens is a ChatGPT login as auth.json keeps it (codex-rs
// login/src/token_data.rs). refresh_token is a required string: a run gets
// it empty.
type tokens struct {
	IDToken      string  `json:"id_token"`
	AccessToken  string  `json:"access_token"`
	RefreshToken string  `json:"refresh_token"`
	AccountID    *string `json:"account_id"`
}

// authFile is the part of auth.json a run may get (codex-rs
// login/src/auth/storage.rs): the mode, an API key, a ChatGPT login's
// tokens and when they were last refreshed. The rest (agent_identity,
// personal_access_token, what later releases add) stays out.
type authFile struct {
	AuthMode    string  `json:"auth_mode,omitempty"`
	APIKey      *string `json:"OPENAI_API_KEY"`
	Tokens      *tokens `json:"tokens,omitempty"`
	LastRefresh *string `json:"last_refresh,omitempty"`
}

// Login is the operator's Codex login as a run gets it.
type Login struct {
	// File is the auth.json the jail gets.
	File []byte
	// Kind is "api key" or "ChatGPT login", for the record's detail.
	Kind string
	// Expires is when a ChatGPT login's access token expires (its JWT's
	// exp); zero for an API key, or when the token does not say.
	Expires time.Time
	// Warning, when set, says the access token expires before the run's
	// wall limit.
	Warning string
	// Secrets are the values in File the record must not show (the API
	// key, or the login's tokens): launch redacts them from the excerpts,
	// as it does a key passed in the environment.
	Secrets []string
}

// AuthForRun makes, from the operator's auth.json src, the one a run gets,
// at now, for a run of at most wall (0: no limit). An API key is kept as it
// is (as ANTHROPIC_API_KEY passes the environment for claude); of a
// ChatGPT login only the id and access tokens, the account and
// last_refresh, with an empty refresh token: whoever holds the refresh
// token can mint access tokens for the operator's account, and a login
// refreshed in the jail would have to be written back, letting the agent
// choose the operator's login (the same rule as claude.LoginForRun).
// Measured with Codex 0.169.0: it accepts an empty refresh token, uses a
// valid access token and asks for no refresh; with an expired one it asks
// for a refresh, again and again, and fails.
//
// It fails with ErrNoLogin when src holds no login, and with
// ErrLoginExpired when the access token had expired by now; a token that
// expires before the wall limit gives a Warning.
func AuthForRun(src []byte, now time.Time, wall time.Duration) (Login, error) {
	var f authFile
	if err := json.Unmarshal(src, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Login{}, fmt.Errorf("%w (its %s is a %s, not what codex writes there)", ErrNoLogin, te.Field, te.Value)
		}
		return Login{}, fmt.Errorf("%w (not JSON: %v)", ErrNoLogin, err)
	}
	var l Login
	switch {
	case f.Tokens != nil && f.Tokens.AccessToken != "":
		l.Kind = "ChatGPT login"
		l.Secrets = []string{f.Tokens.AccessToken, f.Tokens.IDToken}
		f.APIKey = nil
		f.Tokens.RefreshToken = ""
		if exp, ok := jwtExpiry(f.Tokens.AccessToken); ok {
			l.Expires = exp
			if !exp.After(now) {
				return Login{}, fmt.Errorf("%w at %s", ErrLoginExpired, exp.UTC().Format(time.RFC3339))
			}
			if end := now.Add(wall); wall > 0 && exp.Before(end) {
				l.Warning = fmt.Sprintf("its access token expires at %s, %s before the run's wall limit (%s), and the jail gets no refresh token to renew it: codex's model calls then fail",
					exp.UTC().Format(time.RFC3339), end.Sub(exp).Round(time.Second), wall)
			}
		}
	case f.APIKey != nil && *f.APIKey != "":
		l.Kind = "API key"
		l.Secrets = []string{*f.APIKey}
		f = authFile{AuthMode: f.AuthMode, APIKey: f.APIKey}
	default:
		return Login{}, fmt.Errorf("%w (neither OPENAI_API_KEY nor tokens.access_token)", ErrNoLogin)
	}
	var err error
	l.File, err = json.Marshal(f)
	return l, err
}

// jwtExpiry reads the exp claim of a JWT without checking its signature
// (agentjail only needs to know when codex will find it expired).
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}

// envLogins are the variables that give codex a login of its own.
var envLogins = []string{"OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN"}

// EnvLogin returns the first variable of env (NAME=value entries, as the
// jail gets them) that gives codex a login without auth.json, "" when none
// does.
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

package claude

import (
	"bytes"
	"encoding/json"
)

// MaxCredentials bounds the credentials file agentjail reads back: a real
// one is a few hundred bytes.
const MaxCredentials = 1 << 20

// login is the part of ~/.claude/.credentials.json that says which login
// is newer.
type login struct {
	OAuth *struct {
		AccessToken string `json:"accessToken"`
		ExpiresAt   int64  `json:"expiresAt"`
	} `json:"claudeAiOauth"`
}

func parseLogin(b []byte) (token string, expires int64, ok bool) {
	var l login
	if json.Unmarshal(b, &l) != nil || l.OAuth == nil || l.OAuth.AccessToken == "" {
		return "", 0, false
	}
	return l.OAuth.AccessToken, l.OAuth.ExpiresAt, true
}

// WriteBack decides whether the credentials file claude left in the jail
// (staged) goes back to the operator's file, given what was copied in and
// what the operator's file holds now (source; nil when it is gone). It
// returns whether claude refreshed the login, whether to write it back, and
// why, for the record.
//
// Claude Code rotates the refresh token when it refreshes (the old one
// stops working), so a refreshed login that is not written back logs the
// operator out at the next expiry. The newer login wins: when the source
// changed meanwhile (the operator, or another run, refreshed too), the
// staged file goes back only if its token expires later.
func WriteBack(copied, staged, source []byte) (refreshed, write bool, why string) {
	if bytes.Equal(copied, staged) {
		return false, false, "unchanged: claude did not refresh the login"
	}
	token, expires, ok := parseLogin(staged)
	if !ok {
		return false, false, "claude left a credentials file without an OAuth login (claudeAiOauth.accessToken); the source was kept"
	}
	if old, _, ok := parseLogin(copied); ok && old == token {
		return false, false, "the login is unchanged (other fields changed); the source was kept"
	}
	if source != nil && !bytes.Equal(source, copied) {
		if _, srcExpires, ok := parseLogin(source); ok && srcExpires >= expires {
			return true, false, "the source was refreshed meanwhile (by the operator or another run) and is as new; it was kept"
		}
	}
	return true, true, "claude refreshed the login; written back"
}

package codex

import "errors"

// Sentinels; compare with errors.Is. Their text follows the auth file's
// path ("~/.codex/auth.json holds no Codex login").
var (
	// ErrNoLogin: the operator's auth.json holds no login codex could use
	// (not JSON, neither an API key nor an access token).
	ErrNoLogin = errors.New("holds no Codex login")
	// ErrLoginExpired: the ChatGPT login's access token has expired.
	ErrLoginExpired = errors.New("holds a Codex login that expired")
)

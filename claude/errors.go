package claude

import "errors"

// Sentinels; compare with errors.Is. Their text follows the credentials
// file's path ("~/.claude/.credentials.json holds no Claude Code login").
var (
	// ErrNoLogin: the operator's credentials file holds no login claude
	// could use (not JSON, no claudeAiOauth.accessToken).
	ErrNoLogin = errors.New("holds no Claude Code login")
	// ErrLoginExpired: the login's access token has expired.
	ErrLoginExpired = errors.New("holds a Claude Code login that expired")
)

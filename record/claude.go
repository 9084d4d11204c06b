package record

import "encoding/json"

// Claude is the run record's `claude` object: what agentjail learnt about a
// Claude Code run. Result fields are null when
// claude printed no result (text output, or none before it ended).
type Claude struct {
	// OutputFormat is text, json or stream-json; "" when the command is
	// not claude itself (a script that ran it).
	OutputFormat string          `json:"output_format"`
	SessionID    *string         `json:"session_id"`
	Subtype      *string         `json:"subtype"`
	IsError      *bool           `json:"is_error"`
	NumTurns     *int            `json:"num_turns"`
	TotalCostUSD *float64        `json:"total_cost_usd"`
	Usage        json.RawMessage `json:"usage"`
	// APIErrorStatus is the HTTP status of the API error that ended the
	// session, when claude reports one.
	APIErrorStatus *int `json:"api_error_status"`
	// Result is the head of the result text (claude.ExcerptBytes); ResultBytes
	// its whole length.
	Result      *string `json:"result"`
	ResultBytes int     `json:"result_bytes"`
	// ParseError says why json or stream-json output yielded no result: no
	// result line, a malformed one, one cut off, one too long.
	ParseError *string `json:"parse_error"`
	// Credentials is what the run got of the operator's login.
	Credentials *ClaudeLogin `json:"credentials"`
	// Transcripts are the session transcripts copied out (--results).
	Transcripts []string `json:"transcripts"`
}

// ClaudeLogin reports the operator's login copied in (claude.LoginForRun).
type ClaudeLogin struct {
	// Source is the operator's credentials file.
	Source string `json:"source"`
	// Copied says whether its login was copied in; ExpiresAt is when that
	// access token expires (null when none was copied, or the file does
	// not say).
	Copied    bool    `json:"copied"`
	ExpiresAt *string `json:"expires_at"`
	// Refreshed, WriteBack and WrittenBack are always false: agentjail
	// no longer writes a login back (the jail gets no refresh token).
	// They stay for readers of earlier records.
	Refreshed   bool   `json:"refreshed"`
	WriteBack   bool   `json:"write_back"`
	WrittenBack bool   `json:"written_back"`
	Detail      string `json:"detail"`
}

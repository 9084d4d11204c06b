package record

import "encoding/json"

// Agent kinds: the record's agent.kind.
const (
	KindClaude = "claude"
	KindCodex  = "codex"
)

// Agent is the run record's `agent` object: what agentjail learnt about a
// run of an agent it knows (Kind), from the agent's own output as it
// passed and from what agentjail copied in for it. Every kind has every
// field; what a kind does not report is null (or 0, or []).
type Agent struct {
	Kind string `json:"kind"`
	// OutputFormat is how the agent printed: claude's text, json or
	// stream-json; codex's text, or json (`codex exec --json`).
	OutputFormat string `json:"output_format"`
	// SessionID is claude's session id, codex's thread id: what resumes
	// the session (`claude --resume`, `codex exec resume`).
	SessionID *string `json:"session_id"`
	// IsError says whether the agent reported failure (claude's result's
	// is_error; codex's turn.failed); null when it reported neither way.
	IsError *bool `json:"is_error"`
	// Error is the agent's own message about that failure (codex's
	// turn.failed, or its last error event when no turn ended).
	Error *string `json:"error"`
	// Result is the head of the agent's answer (claude's result, codex's
	// last agent message), ExcerptBytes of it; ResultBytes its length.
	Result      *string         `json:"result"`
	ResultBytes int             `json:"result_bytes"`
	Usage       json.RawMessage `json:"usage"`
	// ParseError says why structured output yielded no outcome.
	ParseError *string `json:"parse_error"`
	// Claude Code's result only.
	Subtype        *string  `json:"subtype"`
	NumTurns       *int     `json:"num_turns"`
	TotalCostUSD   *float64 `json:"total_cost_usd"`
	APIErrorStatus *int     `json:"api_error_status"`
	// Commands counts the shell commands the agent ran (codex's
	// command_execution items); null when the output does not say.
	Commands *Commands `json:"commands"`
	// Credentials is what the run got of the operator's login for the
	// agent (null when there is none).
	Credentials *Login `json:"credentials"`
	// Transcripts are the session transcripts copied out (--results).
	Transcripts []string `json:"transcripts"`
}

// Commands counts an agent's shell commands.
type Commands struct {
	Run    int `json:"run"`
	Failed int `json:"failed"` // a non-zero exit, or failed or declined
	// EventsDropped is how many of its events the agent said it dropped
	// (codex, when its in-process event stream lags, as under load): Run
	// and Failed are then only at least so.
	EventsDropped int `json:"events_dropped"`
}

// Login reports the operator's login for an agent, as a run got it.
type Login struct {
	// Source is the operator's file.
	Source string `json:"source"`
	// Copied says whether a login was copied in; ExpiresAt is when its
	// access token expires (null when none was copied, or it does not say).
	Copied    bool    `json:"copied"`
	ExpiresAt *string `json:"expires_at"`
	Detail    string  `json:"detail"`
}

// AgentOf is the agent object of a Claude Code run (its version 1
// `claude` object, kept beside it).
func AgentOf(c *Claude) *Agent {
	a := &Agent{
		Kind: KindClaude, OutputFormat: c.OutputFormat, SessionID: c.SessionID, IsError: c.IsError,
		Result: c.Result, ResultBytes: c.ResultBytes, Usage: c.Usage, ParseError: c.ParseError,
		Subtype: c.Subtype, NumTurns: c.NumTurns, TotalCostUSD: c.TotalCostUSD, APIErrorStatus: c.APIErrorStatus,
		Transcripts: c.Transcripts,
	}
	if l := c.Credentials; l != nil {
		a.Credentials = &Login{Source: l.Source, Copied: l.Copied, ExpiresAt: l.ExpiresAt, Detail: l.Detail}
	}
	return a
}

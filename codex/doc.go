// Package codex is what agentjail knows about the Codex CLI: whether a
// command line runs `codex exec` and with --json, how to read the run's
// outcome out of its JSONL events as they pass (Parser), and which part of
// the operator's ~/.codex/auth.json a run gets (AuthForRun: an API key, or
// a ChatGPT login's access token, never its refresh token).
//
// It is pure, as package claude is: it sees bytes and decides; launch does
// the reading and writing. It must never alter the output it parses, nor
// fail on any byte sequence.
package codex

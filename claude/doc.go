// Package claude is what agentjail knows about Claude Code: whether a
// command line runs it and with which --output-format, how to read the
// result out of its json and stream-json output as it passes (Parser), the
// run record's `claude` object (record.Claude), and which part of the operator's
// login a run gets (LoginForRun: the access token, never the refresh token).
//
// It is pure: it sees bytes and decides; launch does the reading and
// writing. It must never alter the output it parses,
// nor fail on any byte sequence.
package claude

// Package claude is what agentjail knows about Claude Code: whether a
// command line runs it and with which --output-format, how to read the
// result out of its json and stream-json output as it passes (Parser), the
// run record's `claude` object (Summary), and when a credentials file that
// claude refreshed during a run may go back to the operator (WriteBack).
//
// It is pure: it sees bytes and decides; the supervisor and cmd/ do the
// reading, copying and writing. It must never alter the output it parses,
// nor fail on any byte sequence.
package claude

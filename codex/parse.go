package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agentjail/agentjail/record"
)

// Output formats of codex as the record names them.
const (
	FormatText = "text" // the interactive CLI, or exec without --json
	FormatJSON = "json" // codex exec --json: one event per line (JSONL)
)

// MaxLine bounds the line the parser keeps: a longer event (a command's
// aggregated output can be large) is skipped, and recorded when it was one
// the outcome depends on. Memory stays bounded whatever codex prints.
const MaxLine = 8 << 20

// What the record keeps of the events, which the jailed program writes as
// it likes (record.Cut, record.KeepsUsage): the last agent message's and
// an error message's head of ExcerptBytes, a thread id of at most maxID
// bytes, usage that is a JSON object of at most MaxUsage bytes; and the
// parser remembers at most maxCommandIDs command ids (of maxID bytes), to
// count each command once (beyond them, every item counts).
const (
	ExcerptBytes  = record.ExcerptBytes
	maxID         = record.MaxID
	MaxUsage      = record.MaxUsage
	maxCommandIDs = 100000
)

// valueFlags are codex's options that take a value as the next word, before
// or after its subcommand (codex --help, codex exec --help, 0.169.0).
var valueFlags = []string{"-c", "--config", "--enable", "--disable", "-i", "--image", "-m", "--model",
	"--local-provider", "-p", "--profile", "-s", "--sandbox", "-a", "--ask-for-approval", "-C", "--cd",
	"--add-dir", "--thread-source", "--cyber-access-program", "--output-schema", "--color",
	"-o", "--output-last-message"}

// Command reports the output format of a command line that runs the Codex
// CLI (its program's base name is codex): "json" for `codex exec --json`
// (exec's alias e too), "text" otherwise; "" when argv does not run codex.
func Command(argv []string) string {
	if len(argv) == 0 || path.Base(argv[0]) != "codex" {
		return ""
	}
	exec := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return FormatText
		case slices.Contains(valueFlags, a):
			i++
		case a == "--json" && exec:
			return FormatJSON
		case !exec && (a == "exec" || a == "e"):
			exec = true
		case len(a) > 0 && a[0] != '-' && !exec:
			return FormatText // another subcommand, or the TUI's prompt
		}
	}
	return FormatText
}

// Parser reads `codex exec --json`'s stdout as it passes through (it is an
// io.Writer that never fails) and keeps what the record needs: the thread
// id (thread.started), the last agent message, the last turn's usage, a
// failed turn's message, and the commands run. It decodes each event line
// as it ends; a line longer than MaxLine is skipped.
type Parser struct {
	format string
	line   []byte
	size   int

	thread  string
	message *string
	usage   json.RawMessage
	failed  *string // turn.failed's message
	errMsg  *string // the last error event's message
	ended   bool    // a turn.completed or turn.failed
	run     int
	bad     int
	dropped int             // events codex said it dropped (droppedEvents)
	seen    map[string]bool // command items counted
	problem string
}

// NewParser parses output of the given format (Command's answer).
func NewParser(format string) *Parser { return &Parser{format: format, seen: map[string]bool{}} }

// Write implements io.Writer; it takes every byte and never fails.
func (p *Parser) Write(b []byte) (int, error) {
	n := len(b)
	if p.format != FormatJSON {
		return n, nil
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.add(b)
			break
		}
		p.add(b[:i])
		p.endLine(false)
		b = b[i+1:]
	}
	return n, nil
}

func (p *Parser) add(b []byte) {
	p.size += len(b)
	if room := MaxLine - len(p.line); room > 0 {
		p.line = append(p.line, b[:min(room, len(b))]...)
	}
}

// event is one line of `codex exec --json` (codex-rs exec/src/exec_events.rs).
type event struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Usage    json.RawMessage `json:"usage"`
	Message  *string         `json:"message"` // a top-level error event's
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"` // turn.failed's
	Item *struct {
		ID       string  `json:"id"`
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		Message  string  `json:"message"` // an error item's
		ExitCode *int    `json:"exit_code"`
		Status   string  `json:"status"`
	} `json:"item"`
}

func (p *Parser) endLine(eof bool) {
	line, size := p.line, p.size
	p.line, p.size = p.line[:0], 0
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return // not an event (codex prints events only; tolerate others)
	}
	// A turn's end is what the outcome rests on: a problem with another
	// event is left unsaid.
	turn := bytes.Contains(t[:min(len(t), 64)], []byte(`"turn.`))
	if size > MaxLine {
		if turn {
			p.problem = fmt.Sprintf("a turn event is %d bytes, longer than the %d agentjail parses", size, MaxLine)
		}
		return
	}
	var ev event
	if err := json.Unmarshal(t, &ev); err != nil {
		switch {
		case eof:
			p.problem = fmt.Sprintf("the last event is cut off: the output ended after %d bytes of it (%v)", size, err)
		case turn:
			p.problem = fmt.Sprintf("a turn event is not valid JSON: %v", err)
		}
		return
	}
	switch ev.Type {
	case "thread.started":
		if p.thread == "" {
			p.thread = record.Cut(ev.ThreadID, maxID)
		}
	case "item.completed":
		it := ev.Item
		switch {
		case it == nil:
		case it.Type == "agent_message" && it.Text != nil:
			p.message = it.Text
		case it.Type == "error":
			p.dropped = min(p.dropped+droppedEvents(it.Message), 1<<30)
		case it.Type == "command_execution" && !p.seen[record.Cut(it.ID, maxID)]:
			if len(p.seen) < maxCommandIDs {
				p.seen[record.Cut(it.ID, maxID)] = true
			}
			p.run++
			if it.Status == "failed" || it.Status == "declined" || it.ExitCode != nil && *it.ExitCode != 0 {
				p.bad++
			}
		}
	case "turn.completed":
		p.ended, p.problem = true, ""
		if record.KeepsUsage(ev.Usage) {
			p.usage = slices.Clone(ev.Usage)
		}
	case "turn.failed":
		p.ended, p.problem = true, ""
		msg := "turn failed"
		if ev.Error != nil {
			msg = record.Cut(ev.Error.Message, ExcerptBytes)
		}
		p.failed = &msg
	case "error":
		if ev.Message != nil {
			msg := record.Cut(*ev.Message, ExcerptBytes)
			p.errMsg = &msg
		}
	}
}

// droppedEvents is N of the error item codex 0.169.0 prints when the
// in-process event stream between its core and its output lagged (its
// consumer, the JSONL printer, fell behind: a busy machine) and it dropped
// events, command_execution items among them: "in-process app-server event
// stream lagged; dropped N events". 0 for any other message.
func droppedEvents(msg string) int {
	_, rest, ok := strings.Cut(msg, "event stream lagged; dropped ")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest, " events"))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, 1<<30)
}

// Summary returns what the output said, as the record's agent object. Call
// it once the output has ended: a last line without its newline is parsed
// then.
func (p *Parser) Summary() record.Agent {
	if p.size > 0 || len(p.line) > 0 {
		p.endLine(true)
	}
	a := record.Agent{Kind: record.KindCodex, OutputFormat: p.format}
	if p.format != FormatJSON {
		return a
	}
	if p.thread != "" {
		id := p.thread
		a.SessionID = &id
	}
	if m := p.message; m != nil {
		a.ResultBytes = len(*m)
		ex := record.Cut(*m, ExcerptBytes)
		a.Result = &ex
	}
	a.Usage = p.usage
	a.Commands = &record.Commands{Run: p.run, Failed: p.bad, EventsDropped: p.dropped}
	switch {
	case p.failed != nil:
		yes := true
		a.IsError, a.Error = &yes, p.failed
	case p.ended:
		no := false
		a.IsError = &no
	default:
		a.Error = p.errMsg
	}
	switch {
	case p.problem != "":
		msg := p.problem
		a.ParseError = &msg
	case !p.ended:
		msg := "codex printed no turn.completed or turn.failed event"
		a.ParseError = &msg
	}
	return a
}

package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/agentjail/agentjail/record"
)

// Output formats of `claude --print` (its --output-format).
const (
	FormatText       = "text"
	FormatJSON       = "json"
	FormatStreamJSON = "stream-json"
)

// MaxLine bounds the line the parser keeps: a result line longer than this
// is recorded as such, not parsed. Memory stays bounded whatever claude
// prints.
const MaxLine = 8 << 20

// What the record keeps of a result line, which the jailed program writes
// as it likes (record.Cut, record.KeepsUsage): the result text's head of
// ExcerptBytes, a session id and a subtype of at most maxID bytes, usage
// that is a JSON object of at most MaxUsage bytes.
const (
	ExcerptBytes = record.ExcerptBytes
	maxID        = record.MaxID
	MaxUsage     = record.MaxUsage
)

// Command reports the output format of a command line that runs Claude
// Code (its program's base name is claude): "text" unless --output-format
// says json or stream-json; "" when argv does not run claude.
func Command(argv []string) string {
	if len(argv) == 0 || path.Base(argv[0]) != "claude" {
		return ""
	}
	format := FormatText
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		v, ok := strings.CutPrefix(a, "--output-format=")
		if !ok && a == "--output-format" && i+1 < len(argv) {
			v, ok = argv[i+1], true
			i++
		}
		if ok {
			format = v
		}
	}
	return format
}

// Parser reads claude's stdout as it passes through (it is an io.Writer
// that never fails) and keeps what the record needs: the result line, and
// the session id of stream-json's init event (known even when the run is
// cut short). Lines that cannot hold either are skipped as they come, so
// the cost is a scan for newlines.
type Parser struct {
	format string
	line   []byte // the current line, up to MaxLine
	kind   lineKind
	size   int // bytes of the current line, kept or not

	session    string
	result     *resultLine
	resultSize int
	problem    string
}

type lineKind int

const (
	kindUnknown lineKind = iota // too short to tell yet
	kindSkip                    // not a line the record needs
	kindKeep                    // an event whose type is not known from its start
	kindResult
	kindSystem
)

// NewParser parses output of the given format (Command's answer).
func NewParser(format string) *Parser { return &Parser{format: format} }

// Write implements io.Writer; it takes every byte and never fails.
func (p *Parser) Write(b []byte) (int, error) {
	n := len(b)
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

// prefixes tell a line's kind from its first bytes: claude writes each
// event with JSON.stringify, its type first.
var (
	resultPrefix = []byte(`{"type":"result"`)
	systemPrefix = []byte(`{"type":"system"`)
	typePrefix   = []byte(`{"type":"`)
)

func (p *Parser) add(b []byte) {
	p.size += len(b)
	if p.kind == kindUnknown && len(p.line) == 0 {
		// Most lines are told apart from the bytes as they come, and a
		// skipped one is never copied: the parser's cost stays a scan for
		// newlines (BenchmarkParserStreamJSON).
		p.kind = classify(bytes.TrimLeft(b, " \t\r"))
	}
	if p.kind == kindSkip {
		return
	}
	if room := MaxLine - len(p.line); room > 0 {
		p.line = append(p.line, b[:min(room, len(b))]...)
	}
	if p.kind == kindUnknown {
		p.kind = classify(bytes.TrimLeft(p.line, " \t\r"))
		if p.kind == kindSkip {
			p.line = p.line[:0]
		}
	}
}

func classify(l []byte) lineKind {
	switch {
	case len(l) == 0:
		return kindUnknown
	case l[0] == '[':
		return kindKeep // json --verbose: one array of every event
	case l[0] != '{':
		return kindSkip // plain text
	case len(l) < len(resultPrefix):
		return kindUnknown
	case bytes.HasPrefix(l, resultPrefix):
		return kindResult
	case bytes.HasPrefix(l, systemPrefix):
		return kindSystem
	case bytes.HasPrefix(l, typePrefix):
		return kindSkip // assistant, user, stream events: often large, never needed
	}
	return kindKeep
}

// endLine handles a whole line; at the end of the output (eof) one that
// lacked its newline.
func (p *Parser) endLine(eof bool) {
	line, kind, size := p.line, p.kind, p.size
	p.line, p.kind, p.size = p.line[:0], kindUnknown, 0
	if kind == kindSkip || kind == kindUnknown && len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if size > MaxLine {
		if kind == kindResult {
			p.problem = fmt.Sprintf("the result line is %d bytes, longer than the %d agentjail parses", size, MaxLine)
		}
		return
	}
	var events []json.RawMessage
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &events); err != nil {
			p.malformed(true, eof, size, err)
			return
		}
	} else {
		events = []json.RawMessage{line}
	}
	for _, ev := range events {
		var r resultLine
		if err := json.Unmarshal(ev, &r); err != nil {
			p.malformed(kind == kindResult, eof, size, err)
			continue
		}
		switch r.Type {
		case "result":
			p.result, p.resultSize, p.problem = &r, size, ""
			if r.SessionID != nil {
				p.session = record.Cut(*r.SessionID, maxID)
			}
			if r.Subtype != nil {
				sub := record.Cut(*r.Subtype, maxID)
				r.Subtype = &sub
			}
		case "system":
			if r.Subtype != nil && *r.Subtype == "init" && r.SessionID != nil && p.session == "" {
				p.session = record.Cut(*r.SessionID, maxID)
			}
		}
	}
}

func (p *Parser) malformed(result, eof bool, size int, err error) {
	switch {
	case !result:
	case eof:
		p.problem = fmt.Sprintf("the result line is cut off: the output ended after %d bytes of it (%v)", size, err)
	default:
		p.problem = fmt.Sprintf("the result line is not valid JSON: %v", err)
	}
}

// resultLine is claude's result event (and what an init event shares).
type resultLine struct {
	Type           string          `json:"type"`
	Subtype        *string         `json:"subtype"`
	IsError        *bool           `json:"is_error"`
	NumTurns       *int            `json:"num_turns"`
	TotalCostUSD   *float64        `json:"total_cost_usd"`
	Usage          json.RawMessage `json:"usage"`
	Result         *string         `json:"result"`
	SessionID      *string         `json:"session_id"`
	APIErrorStatus *int            `json:"api_error_status"`
}

// Summary returns what the output said. Call it once the output has ended:
// a last line without its newline is parsed then.
func (p *Parser) Summary() record.Claude {
	if p.size > 0 || len(p.line) > 0 {
		p.endLine(true)
	}
	s := record.Claude{OutputFormat: p.format}
	if p.session != "" {
		id := p.session
		s.SessionID = &id
	}
	if r := p.result; r != nil {
		s.Subtype, s.IsError, s.NumTurns, s.TotalCostUSD = r.Subtype, r.IsError, r.NumTurns, r.TotalCostUSD
		s.APIErrorStatus = r.APIErrorStatus
		if record.KeepsUsage(r.Usage) {
			s.Usage = r.Usage
		}
		if r.Result != nil {
			s.ResultBytes = len(*r.Result)
			ex := record.Cut(*r.Result, ExcerptBytes)
			s.Result = &ex
		}
	}
	switch {
	case p.format != FormatJSON && p.format != FormatStreamJSON:
	case p.problem != "":
		msg := p.problem
		s.ParseError = &msg
	case p.result == nil:
		msg := "claude printed no result line"
		s.ParseError = &msg
	}
	return s
}

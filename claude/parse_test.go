package claude

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/record"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"claude", "--print", "hi"}, FormatText},
		{[]string{"/usr/local/bin/claude", "-p", "--output-format", "json", "hi"}, FormatJSON},
		{[]string{"claude", "--output-format=stream-json", "--verbose", "-p", "hi"}, FormatStreamJSON},
		{[]string{"claude", "-p", "--", "--output-format", "json"}, FormatText},
		{[]string{"claude", "--output-format"}, FormatText},
		{[]string{"sh", "-c", "claude --output-format json"}, ""},
		{[]string{"claudette", "--output-format", "json"}, ""},
		{nil, ""},
	} {
		if got := Command(c.argv); got != c.want {
			t.Errorf("Command(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

// The lines below are what claude-code 2.1.197 prints (abridged).
const (
	initLine   = `{"type":"system","subtype":"init","cwd":"/w","session_id":"11111111-init","tools":["Bash"],"model":"claude-opus-4-8"}`
	assistLine = `{"type":"assistant","message":{"content":[{"type":"text","text":"{\"type\":\"result\"}"}]},"session_id":"11111111-init"}`
	okLine     = `{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":201,"num_turns":2,"result":"hello from fake","stop_reason":"end_turn","session_id":"11111111-result","total_cost_usd":0.0002,"usage":{"input_tokens":10,"output_tokens":6}}`
	errorLine  = `{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"num_turns":1,"result":"API Error: 500","session_id":"s-err","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}`
)

func parse(format string, chunks ...string) record.Claude {
	p := NewParser(format)
	for _, c := range chunks {
		p.Write([]byte(c))
	}
	return p.Summary()
}

func TestParserResult(t *testing.T) {
	t.Parallel()
	// Split everywhere: a line arrives in pieces of any size.
	out := initLine + "\n" + assistLine + "\n" + okLine + "\n"
	for _, step := range []int{1, 7, 64, len(out)} {
		var chunks []string
		for i := 0; i < len(out); i += step {
			chunks = append(chunks, out[i:min(i+step, len(out))])
		}
		s := parse(FormatStreamJSON, chunks...)
		if s.ParseError != nil {
			t.Fatalf("step %d: parse error %s", step, *s.ParseError)
		}
		if s.SessionID == nil || *s.SessionID != "11111111-result" || *s.Subtype != "success" || *s.IsError || *s.NumTurns != 2 ||
			*s.TotalCostUSD != 0.0002 || *s.Result != "hello from fake" || s.ResultBytes != 15 || string(s.Usage) != `{"input_tokens":10,"output_tokens":6}` {
			t.Fatalf("step %d: summary %+v", step, s)
		}
	}
}

func TestParserJSONFormats(t *testing.T) {
	t.Parallel()
	s := parse(FormatJSON, errorLine+"\n")
	if s.IsError == nil || !*s.IsError || s.APIErrorStatus == nil || *s.APIErrorStatus != 500 || *s.SessionID != "s-err" {
		t.Errorf("error result: %+v", s)
	}
	// --output-format json --verbose prints one array of every event.
	s = parse(FormatJSON, "["+initLine+","+okLine+"]\n")
	if s.ParseError != nil || *s.SessionID != "11111111-result" || *s.NumTurns != 2 {
		t.Errorf("array output: %+v", s)
	}
	// A last line without its newline is still a whole result.
	if s = parse(FormatJSON, okLine); s.ParseError != nil || *s.Result != "hello from fake" {
		t.Errorf("unterminated: %+v", s)
	}
}

func TestParserProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, format string
		out          string
		want         string // in parse_error; "" means none
		session      string
	}{
		{"cut off", FormatStreamJSON, initLine + "\n" + okLine[:90], "cut off: the output ended after 90 bytes", "11111111-init"},
		{"malformed", FormatJSON, `{"type":"result","is_error":fals}` + "\n", "not valid JSON", ""},
		{"none", FormatStreamJSON, initLine + "\n" + assistLine + "\n", "claude printed no result line", "11111111-init"},
		{"empty", FormatJSON, "", "claude printed no result line", ""},
		{"garbage", FormatJSON, "\x00\xff\xfe not json\n\n{[\n", "claude printed no result line", ""},
		{"text", FormatText, "hello\n" + okLine + "\n", "", "11111111-result"},
		{"wrong types", FormatJSON, `{"type":"result","num_turns":"two"}` + "\n", "not valid JSON", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(c.format, c.out)
			switch {
			case c.want == "" && s.ParseError != nil:
				t.Errorf("parse error %q, want none", *s.ParseError)
			case c.want != "" && (s.ParseError == nil || !strings.Contains(*s.ParseError, c.want)):
				t.Errorf("parse error %v, want %q", s.ParseError, c.want)
			}
			if got := deref(s.SessionID); got != c.session {
				t.Errorf("session %q, want %q", got, c.session)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestParserBounded: a huge line costs no more than MaxLine of memory,
// and an oversized result line is reported, not parsed.
func TestParserBounded(t *testing.T) {
	t.Parallel()
	p := NewParser(FormatStreamJSON)
	big := bytes.Repeat([]byte("x"), 1<<20)
	p.Write([]byte(`{"type":"assistant","text":"`))
	for range 20 {
		p.Write(big)
	}
	p.Write([]byte("\"}\n"))
	if cap(p.line) > 1<<10 {
		t.Errorf("a skipped line was kept: %d bytes", cap(p.line))
	}
	p.Write([]byte(`{"type":"result","result":"`))
	for range 9 {
		p.Write(big)
	}
	p.Write([]byte("\"}\n"))
	if cap(p.line) > 2*MaxLine {
		t.Errorf("line buffer grew to %d", cap(p.line))
	}
	s := p.Summary()
	if s.ParseError == nil || !strings.Contains(*s.ParseError, "longer than the 8388608 agentjail parses") {
		t.Errorf("parse error %v", s.ParseError)
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", ExcerptBytes) // 2 bytes each
	s := parse(FormatJSON, `{"type":"result","result":"`+long+`"}`+"\n")
	if s.ResultBytes != 2*ExcerptBytes || len(*s.Result) != ExcerptBytes || !strings.HasSuffix(*s.Result, "é") {
		t.Errorf("excerpt of %d bytes, result_bytes %d", len(*s.Result), s.ResultBytes)
	}
}

func FuzzParser(f *testing.F) {
	f.Add([]byte(initLine + "\n" + okLine + "\n"))
	f.Add([]byte("[" + okLine + "]"))
	// Whatever came before, a whole result line after it is found.
	f.Fuzz(func(t *testing.T, b []byte) {
		p := NewParser(FormatStreamJSON)
		for len(b) > 0 {
			n := min(len(b), 13)
			if w, err := p.Write(b[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			b = b[n:]
		}
		p.Write([]byte("\n" + okLine + "\n"))
		if s := p.Summary(); s.Result == nil || *s.Result != "hello from fake" || s.ParseError != nil {
			t.Fatalf("summary %+v", s)
		}
	})
}

// TestParserBoundsWhatTheAgentWrites: of a result line the jailed program
// writes as it likes, the record keeps a bounded session id, subtype and
// usage (an object of at most MaxUsage bytes), as it does the result.
func TestParserBoundsWhatTheAgentWrites(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	p := NewParser(FormatJSON)
	p.Write([]byte(`{"type":"result","subtype":"` + big + `","session_id":"` + big + `","usage":[` + strings.Repeat("1,", 100000) + `1],"result":"ok"}` + "\n"))
	s := p.Summary()
	if s.SessionID == nil || len(*s.SessionID) > 256 || s.Subtype == nil || len(*s.Subtype) > 256 || len(s.Usage) > MaxUsage {
		t.Errorf("the record keeps a %d-byte session id, a %d-byte subtype, %d bytes of usage", len(*s.SessionID), len(*s.Subtype), len(s.Usage))
	}
}

package codex

import (
	"strconv"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	for argv, want := range map[string]string{
		"codex exec --json hi":                          FormatJSON,
		"/opt/bin/codex e --json -s workspace-write hi": FormatJSON,
		"codex -c model=o3 exec -m o3 --json hi":        FormatJSON,
		"codex exec -c --json hi":                       FormatText, // --json is -c's value
		"codex exec hi":                                 FormatText,
		"codex --json":                                  FormatText, // not exec's
		"codex review --json":                           FormatText,
		"codex exec -- --json":                          FormatText,
		"codex":                                         FormatText,
		"claude --print":                                "",
		"sh -c codex exec --json":                       "",
		"codex exec resume --last --json":               FormatJSON,
		"codex -c 'model_providers.x={base_url=\"u\"}' exec --json": FormatJSON,
	} {
		if got := Command(strings.Fields(argv)); got != want {
			t.Errorf("Command(%q) = %q, want %q", argv, got, want)
		}
	}
}

// A run of Codex 0.169.0 against the tests' stand-in: one shell command,
// then an answer (captured from `codex exec --json`).
const success = `{"type":"thread.started","thread_id":"01a212b0-a23e-7d51-aaee-c0c7769768c6"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for ` + "`stub-model`" + ` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'printf hi > out.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'printf hi > out.txt'","aggregated_output":"","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'false'","aggregated_output":"","exit_code":1,"status":"failed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"first"}}
{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"done-codex"}}
{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":6,"reasoning_output_tokens":0}}
`

// A run whose model call failed (response.failed, insufficient_quota).
const failure = `{"type":"thread.started","thread_id":"01a212b8-b56a-7340-adec-d2246efbf508"}
{"type":"turn.started"}
{"type":"error","message":"Quota exceeded. Check your plan and billing details."}
{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing details."}}
`

func parse(format, out string, chunk int) *Parser {
	p := NewParser(format)
	for len(out) > 0 {
		n := min(chunk, len(out))
		p.Write([]byte(out[:n]))
		out = out[n:]
	}
	return p
}

func TestParserSuccess(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{1, 7, 1 << 20} {
		a := parse(FormatJSON, success, chunk).Summary()
		if a.Kind != "codex" || a.OutputFormat != "json" || a.SessionID == nil || *a.SessionID != "01a212b0-a23e-7d51-aaee-c0c7769768c6" ||
			a.Result == nil || *a.Result != "done-codex" || a.ResultBytes != 10 || a.IsError == nil || *a.IsError || a.Error != nil ||
			a.ParseError != nil || a.Commands == nil || a.Commands.Run != 2 || a.Commands.Failed != 1 ||
			!strings.Contains(string(a.Usage), `"output_tokens":6`) {
			t.Errorf("chunk %d: %+v (usage %s)", chunk, a, a.Usage)
		}
	}
}

func TestParserFailure(t *testing.T) {
	t.Parallel()
	a := parse(FormatJSON, failure, 5).Summary()
	if a.IsError == nil || !*a.IsError || a.Error == nil || *a.Error != "Quota exceeded. Check your plan and billing details." ||
		a.Result != nil || a.ParseError != nil || a.SessionID == nil {
		t.Errorf("%+v", a)
	}
}

func TestParserProblems(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ out, want string }{
		"no turn end":   {`{"type":"thread.started","thread_id":"x"}` + "\n" + `{"type":"error","message":"Reconnecting... 1/5"}` + "\n", "no turn.completed or turn.failed"},
		"cut off":       {`{"type":"thread.started","thread_id":"x"}` + "\n" + `{"type":"turn.comp`, "cut off"},
		"bad turn":      {`{"type":"turn.completed",}` + "\n", "a turn event is not valid JSON"},
		"too long turn": {`{"type":"turn.completed","usage":"` + strings.Repeat("x", MaxLine) + `"}` + "\n", "longer than"},
		"text":          {"no events at all\n", "no turn.completed"},
	} {
		a := parse(FormatJSON, c.out, 4096).Summary()
		if a.ParseError == nil || !strings.Contains(*a.ParseError, c.want) {
			t.Errorf("%s: parse_error %v, want %q", name, a.ParseError, c.want)
		}
	}
	// A bad line that is no turn's is no problem.
	a := parse(FormatJSON, "{oops\n"+success, 4096).Summary()
	if a.ParseError != nil {
		t.Errorf("parse_error %q", *a.ParseError)
	}
	if e := parse(FormatJSON, `{"type":"error","message":"Reconnecting... 1/5"}`+"\n", 9).Summary().Error; e == nil || *e != "Reconnecting... 1/5" {
		t.Errorf("error %v", e)
	}
}

// TestParserDroppedEvents: codex's error items saying its event stream
// lagged and dropped events are summed in commands.events_dropped (the
// counts are then lower bounds); other error items count nothing.
func TestParserDroppedEvents(t *testing.T) {
	t.Parallel()
	lag := func(msg string) string {
		return `{"type":"item.completed","item":{"id":"item_9","type":"error","message":"` + msg + `"}}` + "\n"
	}
	out := lag("in-process app-server event stream lagged; dropped 7 events") +
		lag("Model metadata for `stub-model` not found.") +
		lag("in-process app-server event stream lagged; dropped 3 events") +
		lag("in-process app-server event stream lagged; dropped 99999999999999999999 events") + success
	for _, chunk := range []int{1, 4096} {
		a := parse(FormatJSON, out, chunk).Summary()
		if a.Commands == nil || a.Commands.EventsDropped != 10 || a.Commands.Run != 2 {
			t.Errorf("chunk %d: commands %+v, want 10 events dropped and 2 run", chunk, a.Commands)
		}
	}
	if a := parse(FormatJSON, success, 4096).Summary(); a.Commands.EventsDropped != 0 {
		t.Errorf("events_dropped %d of a run that dropped none", a.Commands.EventsDropped)
	}
}

func TestParserText(t *testing.T) {
	t.Parallel()
	a := parse(FormatText, success, 100).Summary()
	if a.OutputFormat != "text" || a.SessionID != nil || a.Result != nil || a.ParseError != nil || a.Commands != nil {
		t.Errorf("plain text was parsed: %+v", a)
	}
}

func FuzzParser(f *testing.F) {
	f.Add(success, 3)
	f.Add(failure, 1)
	f.Fuzz(func(t *testing.T, out string, chunk int) {
		if chunk < 1 {
			chunk = 1
		}
		a := parse(FormatJSON, out, chunk).Summary()
		if a.Result != nil && len(*a.Result) > ExcerptBytes {
			t.Errorf("result excerpt of %d bytes", len(*a.Result))
		}
	})
}

// TestParserBoundsWhatTheAgentWrites: the record keeps a bounded part of
// whatever the jailed program prints as events (an error message, a
// thread id, usage that is not a small object), and the parser's memory
// stays bounded however many command items it sees.
func TestParserBoundsWhatTheAgentWrites(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	p := NewParser(FormatJSON)
	p.Write([]byte(`{"type":"thread.started","thread_id":"` + big + `"}` + "\n"))
	p.Write([]byte(`{"type":"turn.completed","usage":[` + strings.Repeat(`1,`, 100000) + `1]}` + "\n"))
	p.Write([]byte(`{"type":"turn.failed","error":{"message":"` + big + `"}}` + "\n"))
	for i := range 3 * maxCommandIDs {
		p.Write([]byte(`{"type":"item.completed","item":{"id":"` + strings.Repeat("i", 100) + strconv.Itoa(i) + `","type":"command_execution","exit_code":0}}` + "\n"))
	}
	if len(p.seen) > maxCommandIDs {
		t.Errorf("the parser keeps %d command ids", len(p.seen))
	}
	a := p.Summary()
	if a.SessionID == nil || len(*a.SessionID) > ExcerptBytes || a.Error == nil || len(*a.Error) > ExcerptBytes || len(a.Usage) > MaxUsage {
		t.Errorf("the record keeps a %d-byte thread id, a %d-byte error, %d bytes of usage", len(*a.SessionID), len(*a.Error), len(a.Usage))
	}
	if a.Commands.Run != 3*maxCommandIDs {
		t.Errorf("%d commands counted, want %d", a.Commands.Run, 3*maxCommandIDs)
	}
}

package record

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRecordHasStableShapes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	rec := Record{RunID: "abc", StartedAt: Time(start), Reason: ReasonSetupFailed, ExitCode: ExitSetup,
		Excerpt: Excerpts{Stdout: ExcerptOf([]byte("ok \x00\xff"), nil, 0, nil, nil)}}
	rec.Finish(start.Add(1500 * time.Millisecond))
	data, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("the record does not end with a newline: %q", data[len(data)-5:])
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	if got["started_at"] != "2026-01-02T03:04:05.678Z" || got["ended_at"] != "2026-01-02T03:04:07.178Z" || got["duration_ms"] != 1500.0 {
		t.Errorf("times: %v %v %v", got["started_at"], got["ended_at"], got["duration_ms"])
	}
	// Lists are [] and unknown values null, never absent.
	for _, k := range []string{"signals_sent", "signals_received", "orphans", "degradations", "violations", "warnings", "argv"} {
		if l, ok := got[k].([]any); !ok || len(l) != 0 {
			t.Errorf("%s = %#v, want []", k, got[k])
		}
	}
	for _, k := range []string{"signal", "agent_exit_code", "agent_signal", "user"} {
		if v, ok := got[k]; !ok || v != nil {
			t.Errorf("%s = %#v, want null", k, v)
		}
	}
	if h := got["excerpt"].(map[string]any)["stdout"].(map[string]any)["head"]; h != "ok \x00\uFFFD" {
		t.Errorf("excerpt head %q", h)
	}
}

func TestRedactHidesSecretsButNotShortValues(t *testing.T) {
	t.Parallel()
	got := Redact("key sk-ant-123456 and 1 and sk-ant-123456 again", []string{"sk-ant-123456", "1", ""})
	if strings.Contains(got, "sk-ant") || !strings.Contains(got, " 1 ") {
		t.Errorf("redact: %q", got)
	}
}

// TestRedactExcerptMasksSecretsCutAtItsEdges: a secret the jail does not
// hold (the broker's) that the omitted bytes cut leaves neither its start
// at the end of the head nor its end at the start of the tail: each gives
// up 512 bytes (that secret's length, rounded up) at the cut, whatever they hold (masking
// only what matched told a later run whether its guess at a secret's first
// bytes was right); a whole secret is masked first, so that none of it
// shows where the cut falls inside it; one that straddles contiguous
// pieces is masked on both sides; a value the jail holds costs no bytes.
func TestRedactExcerptMasksSecretsCutAtItsEdges(t *testing.T) {
	t.Parallel()
	const secret = "sk-ant-0123456789" // 17 bytes: 512 go at a cut
	known, hidden := []string{"short", "", "a-value-of-the-jails-own-environment"}, []string{secret}
	pad := strings.Repeat(".", 520)
	for _, c := range []struct {
		name, head, tail   string
		omitted            int64
		wantHead, wantTail string
		wantOmitted        int64
	}{
		{"cut by the omitted bytes", pad + "sk-ant-01", "6789" + pad, 5, pad[:17], pad[508:], 1029},
		{"a wrong guess goes the same way", pad + "sk-ant-0X", "X789" + pad, 5, pad[:17], pad[508:], 1029},
		{"whole, across where the head is cut", pad[:500] + secret + pad[:500], pad, 5, pad[:500] + "[redacted]", pad[512:], 1029},
		{"straddling contiguous pieces", "key=sk-ant-01234", "56789;", 0, "key=[redacted]", "[redacted];", 0},
		{"whole in each piece", "a " + secret + " b" + pad, pad + "c " + secret, 100, "a [redacted] b" + pad[:8], pad[512:] + "c [redacted]", 1124},
		{"contiguous: a prefix alone is text", "ends with sk-ant", " and more", 0, "ends with sk-ant", " and more", 0},
		{"short values are not secrets", "a short text", "", 0, "a short text", "", 0},
		{"masked runs merge", secret + secret, "", 0, "[redacted]", "", 0},
	} {
		h, tl, om := RedactExcerpt(c.head, c.tail, c.omitted, known, hidden)
		if h != c.wantHead || tl != c.wantTail || om != c.wantOmitted {
			t.Errorf("%s: got %q, %q, %d omitted; want %q, %q, %d", c.name, h, tl, om, c.wantHead, c.wantTail, c.wantOmitted)
		}
	}
	if h, tl, om := RedactExcerpt("x a-value-of-the-jails-own-environment", "tail", 7, known, nil); h != "x [redacted]" || tl != "tail" || om != 7 {
		t.Errorf("a value the jail holds: %q, %q, %d", h, tl, om)
	}
	// The record's excerpt: redacted on the bytes as written, then valid
	// UTF-8 (a secret with a multi-byte character whole in the head).
	ex := ExcerptOf([]byte("x=pässwörd-ä"+pad), []byte(pad+"\xff"), 3, nil, []string{"pässwörd-ä"})
	if ex.Head != "x=[redacted]"+pad[:8] || ex.Tail != pad[512:]+"\uFFFD" || ex.OmittedBytes != 3+1024 {
		t.Errorf("excerpt %+v", ex)
	}
}

func TestViolateEndsTheRunWithViolation(t *testing.T) {
	t.Parallel()
	r := Record{Reason: ReasonExit, ExitCode: 0}
	r.Violate()
	if r.Reason != ReasonExit || r.ExitCode != 0 {
		t.Fatalf("no violation changed the outcome: %s %d", r.Reason, r.ExitCode)
	}
	r.Violate(Note{What: ViolationSetID, Detail: "x"})
	if r.Reason != ReasonViolation || r.ExitCode != 123 || len(r.Violations) != 1 {
		t.Errorf("reason %s, exit %d, %v", r.Reason, r.ExitCode, r.Violations)
	}
	r = Record{Reason: ReasonSetupFailed, ExitCode: ExitSetup}
	r.Violate(Note{What: ViolationSetID, Detail: "x"})
	if r.Reason != ReasonSetupFailed {
		t.Errorf("setup_failed must win, got %s", r.Reason)
	}
}

// TestExitCodesAreDocumented: docs/usage.md's one exit-code table gives
// each of agentjail's own codes with its reasons.
func TestExitCodesAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	// A map literal: two endings with one code would not compile.
	for code, reasons := range map[int][]string{
		ExitLimit:     {ReasonPidsLimit, ReasonMemoryLimit},
		ExitViolation: {ReasonViolation},
		ExitTimeout:   {ReasonWallTimeout, ReasonIdleTimeout, ReasonStopped},
		ExitSetup:     {ReasonSetupFailed},
	} {
		row := ""
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, "| "+strconv.Itoa(code)+" |") {
				row = l
			}
		}
		for _, r := range reasons {
			if !strings.Contains(row, "`"+r+"`") {
				t.Errorf("docs/usage.md: the row of exit %d lacks reason %s: %q", code, r, row)
			}
		}
	}
}

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
		Excerpt: Excerpts{Stdout: ExcerptOf([]byte("ok \x00\xff"), nil, 0, nil)}}
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

// TestRedactExcerptMasksSecretsCutAtItsEdges: a secret the omitted bytes
// cut leaves neither its start at the end of the head nor its end at the
// start of the tail; one that straddles contiguous pieces is masked on
// both sides; a stretch that merely resembles a secret's first bytes or
// too little of one stays.
func TestRedactExcerptMasksSecretsCutAtItsEdges(t *testing.T) {
	t.Parallel()
	const secret = "sk-ant-0123456789"
	secrets := []string{secret, "short", ""}
	for _, c := range []struct {
		name, head, tail string
		omitted          int64
		wantHead         string
		wantTail         string
	}{
		{"cut by the omitted bytes", "output: sk-ant-01", "6789 done", 5, "output: [redacted]", "[redacted] done"},
		{"straddling contiguous pieces", "key=sk-ant-01234", "56789;", 0, "key=[redacted]", "[redacted];"},
		{"whole in each piece", "a " + secret + " b", "c " + secret, 100, "a [redacted] b", "c [redacted]"},
		{"two bytes show", "ends with sk", "89 starts", 10, "ends with sk", "89 starts"},
		{"three bytes show", "ends with sk-", "789 starts", 10, "ends with [redacted]", "[redacted] starts"},
		{"contiguous: a prefix alone is text", "ends with sk-ant", " and more", 0, "ends with sk-ant", " and more"},
		{"short values are not secrets", "a short text", "", 0, "a short text", ""},
		{"masked runs merge", secret + secret, "", 0, "[redacted]", ""},
	} {
		h, tl := RedactExcerpt(c.head, c.tail, c.omitted, secrets)
		if h != c.wantHead || tl != c.wantTail {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, h, tl, c.wantHead, c.wantTail)
		}
	}
	// The record's excerpt: redacted on the bytes as written, then valid
	// UTF-8 (a secret with a multi-byte character cut inside it).
	ex := ExcerptOf([]byte("x=pässwörd-ä"[:9]), []byte("pässwörd-ä"[9:]+"\xff"), 3, []string{"pässwörd-ä"})
	if ex.Head != "x=[redacted]" || ex.Tail != "[redacted]\uFFFD" {
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

package supervise

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecordIsWrittenAtomicallyWithStableShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	os.WriteFile(path, []byte("an older record"), 0o644)
	start := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	rec := Record{RunID: "abc", StartedAt: Time(start), Reason: ReasonSetupFailed, ExitCode: ExitSetup,
		Excerpt: Excerpts{Stdout: excerptOf([]byte("ok \x00\xff"), nil, 0, nil)}}
	rec.Finish(start.Add(1500 * time.Millisecond))
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("temporary files left: %v", left)
	}
	data, _ := os.ReadFile(path)
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
	if err := CheckWritable(filepath.Join(dir, "missing", "run.json")); err == nil {
		t.Error("CheckWritable accepted a missing directory")
	}
}

func TestRedactHidesSecretsButNotShortValues(t *testing.T) {
	t.Parallel()
	got := Redact("key sk-ant-123456 and 1 and sk-ant-123456 again", []string{"sk-ant-123456", "1", ""})
	if strings.Contains(got, "sk-ant") || !strings.Contains(got, " 1 ") {
		t.Errorf("redact: %q", got)
	}
}

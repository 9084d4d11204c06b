package fakeopenai

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads an SSE stream's data lines.
func events(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var v map[string]any
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				t.Fatalf("data line is not JSON: %v: %s", err, data)
			}
			out = append(out, v)
		}
	}
	return out
}

// TestScript: the steps are answered in order, each stream ends with
// response.completed (or is response.failed), a tool call carries its
// command as JSON arguments, and the outputs Codex sends back are read
// once each.
func TestScript(t *testing.T) {
	t.Parallel()
	s := New(t, Exec("echo hi"), Text("done"), Failed("insufficient_quota"))
	r := post(t, s.URL+"/responses", `{"input":[]}`)
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	ev := events(t, r)
	if len(ev) != 2 || ev[0]["type"] != "response.output_item.done" || ev[1]["type"] != "response.completed" {
		t.Fatalf("events %v", ev)
	}
	item := ev[0]["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["arguments"] != `{"cmd":"echo hi"}` {
		t.Errorf("tool call %v", item)
	}
	out := `{"input":[{"type":"function_call_output","call_id":"call_resp_1","output":"hi\n"}]}`
	ev = events(t, post(t, s.URL+"/responses", out))
	if text := ev[0]["item"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; text != "done" {
		t.Errorf("text %v", text)
	}
	ev = events(t, post(t, s.URL+"/responses", out))
	if len(ev) != 1 || ev[0]["type"] != "response.failed" {
		t.Errorf("events %v", ev)
	}
	if o := s.Outputs(); len(o) != 1 || o[0].Output != "hi\n" || o[0].CallID != "call_resp_1" {
		t.Errorf("outputs %+v", o)
	}
	if s.Responses() != 3 {
		t.Errorf("%d responses requests", s.Responses())
	}
}

// TestStatus: an HTTP error is sticky.
func TestStatus(t *testing.T) {
	t.Parallel()
	s := New(t, Fail(http.StatusInternalServerError))
	for range 2 {
		if r := post(t, s.URL+"/responses", `{}`); r.StatusCode != http.StatusInternalServerError {
			t.Errorf("status %d", r.StatusCode)
		}
	}
	if r := post(t, s.URL+"/models", `{}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown path answers %d", r.StatusCode)
	}
}

package fakeapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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

// TestStreaming: the SSE events a client SDK expects, in order, with the
// tool's input as one input_json_delta.
func TestStreaming(t *testing.T) {
	t.Parallel()
	s := New(t, Step{Text: "hi", Tool: &ToolCall{Name: "Bash", Input: map[string]any{"command": "ls"}}})
	resp := post(t, s.URL+"/v1/messages?beta=true", `{"model":"m","stream":true,"messages":[]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	var input string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, "input_json_delta") {
			var d struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			json.Unmarshal([]byte(data), &d)
			input = d.Delta.PartialJSON
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if input != `{"command":"ls"}` {
		t.Errorf("tool input %q", input)
	}
}

// TestBefore: a step's Before has run when its answer arrives.
func TestBefore(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{})
	s := New(t, Step{Text: "after", Before: func() { close(ran) }})
	post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`)
	select {
	case <-ran:
	default:
		t.Error("the answer came before Before ran")
	}
}

func TestJSONAndErrors(t *testing.T) {
	t.Parallel()
	s := New(t, Text("one"), Fail(529))
	var msg struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	json.NewDecoder(post(t, s.URL+"/v1/messages", `{"messages":[]}`).Body).Decode(&msg)
	if len(msg.Content) != 1 || msg.Content[0].Text != "one" || msg.StopReason != "end_turn" {
		t.Errorf("reply %+v", msg)
	}
	for range 2 { // an error is sticky: retries meet it too
		if r := post(t, s.URL+"/v1/messages", `{}`); r.StatusCode != 529 {
			t.Errorf("status %d, want 529", r.StatusCode)
		}
	}
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	json.NewDecoder(post(t, s.URL+"/v1/messages/count_tokens", `{"messages":[]}`).Body).Decode(&n)
	if n.InputTokens <= 0 {
		t.Errorf("count_tokens %d", n.InputTokens)
	}
	if r, err := http.Head(s.URL + "/"); err != nil || r.StatusCode != 200 {
		t.Errorf("HEAD /: %v %v", r, err)
	}
	if got := len(s.Messages()); got != 3 {
		t.Errorf("%d messages recorded, want 3", got)
	}
}

// TestRetryGetsTheSameStep: a request that repeats the body of the one
// before (the CLI retrying it) is answered by the same step, Before not
// run again, and the script does not move on.
func TestRetryGetsTheSameStep(t *testing.T) {
	t.Parallel()
	before := 0
	s := New(t, Step{Text: "one", Before: func() { before++ }}, Text("two"))
	text := func(body string) string {
		var msg struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.NewDecoder(post(t, s.URL+"/v1/messages", body).Body).Decode(&msg)
		if len(msg.Content) != 1 {
			return ""
		}
		return msg.Content[0].Text
	}
	turns := func(n int) string {
		return `{"messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, n-1) + `{"role":"user","content":"x"}]}`
	}
	got := []string{text(turns(1)), text(turns(1)), text(turns(2)), text(turns(3)), text(turns(3))}
	if want := []string{"one", "one", "two", "(script done)", "(script done)"}; strings.Join(got, ",") != strings.Join(want, ",") || before != 1 {
		t.Errorf("answers %q, Before ran %d times; want %q and once", got, before, want)
	}
	if turns := s.Turns(); turns != "1 1 2 3 3" {
		t.Errorf("turns %q", turns)
	}
}

// TestStallEndsWithTheServer: a stalled reply never outlives the test.
func TestStallEndsWithTheServer(t *testing.T) {
	t.Parallel()
	s := New(t, Stall(time.Hour))
	done := make(chan struct{})
	go func() {
		resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
		if err == nil {
			bufio.NewReader(resp.Body).ReadString('\n') // message_start comes first
			resp.Body.Close()
		}
		close(done)
	}()
	for deadline := time.Now().Add(30 * time.Second); len(s.Messages()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never arrived")
		}
	}
	s.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled reply outlived Close")
	}
}

// TestSideRequests: a request with no tools that asks for structured
// output (the interactive CLI's session title) is answered apart and takes
// no step of the script; Messages leaves it out, Side lists it.
func TestSideRequests(t *testing.T) {
	t.Parallel()
	s := New(t, Text("the step"))
	title := post(t, s.URL+"/v1/messages", `{"model":"m","tools":[],"output_config":{"format":{"type":"json_schema"}},"messages":[]}`)
	var got struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.NewDecoder(title.Body).Decode(&got)
	if len(got.Content) != 1 || got.Content[0].Text != SideTitle {
		t.Errorf("the side request got %+v", got)
	}
	main := post(t, s.URL+"/v1/messages", `{"model":"m","tools":[{"name":"Bash"}],"messages":[]}`)
	json.NewDecoder(main.Body).Decode(&got)
	if len(got.Content) != 1 || got.Content[0].Text != "the step" {
		t.Errorf("the first main request got %+v", got)
	}
	if len(s.Messages()) != 1 || len(s.Side()) != 1 {
		t.Errorf("%d messages, %d side requests", len(s.Messages()), len(s.Side()))
	}
}

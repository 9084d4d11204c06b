// Package fakeopenai is a local stand-in for the OpenAI Responses API, for
// tests that drive the real Codex CLI: it answers POST /v1/responses with a
// server-sent event stream from a script the test gives (an assistant
// message, a call of Codex's shell tool exec_command, a failed response,
// an HTTP error), and records every request for the test to inspect. It is
// fakeapi's twin for Codex.
//
// Codex 0.169.0 ignores OPENAI_BASE_URL; it reaches the server through a
// custom model provider given on its command line (Args). The server
// listens on 127.0.0.1, so a jail that shares the host's network namespace
// reaches it too.
//
// The stream is the least Codex reads (codex-rs codex-api/src/sse): each
// reply is the finished output item (response.output_item.done) and then
// response.completed, which must end every stream; the `event:` lines are
// not read, only the data's `type`.
//
// It is imported by tests only, and it must not grow into a model: a reply
// is exactly what the script says.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Step is the answer to one POST /v1/responses.
type Step struct {
	// Text is an assistant message.
	Text string
	// Exec, when set, is a call of exec_command with this shell command
	// instead; Codex runs it and sends its output in the next request,
	// which the next step answers.
	Exec string
	// Failed, when set, answers with a response.failed event carrying
	// this error code (insufficient_quota, rate_limit_exceeded, ...).
	Failed string
	// Status, when not 0, answers with this HTTP status and an error body
	// instead of a stream; it is sticky: every later request gets it too.
	Status int
}

// Text is a reply with one assistant message.
func Text(s string) Step { return Step{Text: s} }

// Exec is a reply that calls exec_command with cmd.
func Exec(cmd string) Step { return Step{Exec: cmd} }

// Failed is a reply whose response failed with the error code.
func Failed(code string) Step { return Step{Failed: code} }

// Fail answers with an HTTP error status, now and for every later request.
func Fail(status int) Step { return Step{Status: status} }

// APIKey is the dummy key the tests give Codex.
const APIKey = "sk-fakeopenai-0000"

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Output is a function_call_output Codex sent back: what a tool call gave.
type Output struct {
	CallID string
	Output string
}

// Server is a running stand-in.
type Server struct {
	// URL is the base URL, with /v1.
	URL string

	mu       sync.Mutex
	steps    []Step
	next     int
	sticky   *Step
	requests []Request
	srv      *http.Server
}

// New starts a server that answers the responses requests with steps, in
// order; past the last step it answers "(script done)". It is closed when
// the test ends.
func New(t testing.TB, steps ...Step) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", steps: steps}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Args are Codex's options that point it at the server: a model provider
// of its own speaking the Responses API, with retries off (a failing
// server costs one request, not Codex's default of five per stream and
// four per request, with back-off).
func (s *Server) Args() []string {
	provider := fmt.Sprintf(`model_providers.stub={name="stub", base_url=%q, wire_api="responses", env_key="OPENAI_API_KEY", request_max_retries=0, stream_max_retries=0}`, s.URL)
	return []string{"-c", provider, "-c", "model_provider=stub", "-c", "model=stub-model"}
}

// Env is the environment Codex needs beside Args: the dummy key.
func (s *Server) Env() []string { return []string{"OPENAI_API_KEY=" + APIKey} }

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Responses counts the responses requests received so far.
func (s *Server) Responses() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && isResponses(r.Path) {
			n++
		}
	}
	return n
}

// Outputs returns every function_call_output Codex sent, in order, each
// once (a request repeats the earlier ones in its input).
func (s *Server) Outputs() []Output {
	var out []Output
	seen := map[string]bool{}
	for _, r := range s.Requests() {
		var body struct {
			Input []struct {
				Type   string          `json:"type"`
				CallID string          `json:"call_id"`
				Output json.RawMessage `json:"output"`
			} `json:"input"`
		}
		if json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, in := range body.Input {
			if in.Type != "function_call_output" || seen[in.CallID] {
				continue
			}
			seen[in.CallID] = true
			out = append(out, Output{CallID: in.CallID, Output: outputText(in.Output)})
		}
	}
	return out
}

// outputText flattens an output: a string, or a list of content items.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &items)
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text)
	}
	return b.String()
}

// Dump renders the requests for a test's failure message.
func (s *Server) Dump() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		fmt.Fprintf(&b, "%s %s %.600s\n", r.Method, r.Path, r.Body)
	}
	return b.String()
}

func isResponses(path string) bool {
	return strings.HasSuffix(strings.SplitN(path, "?", 2)[0], "/responses")
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	n := len(s.requests)
	s.mu.Unlock()
	if r.Method != http.MethodPost || !isResponses(r.URL.Path) {
		writeJSON(w, http.StatusNotFound, apiError("not served by the stand-in", "invalid_request_error", ""))
		return
	}
	st := s.take()
	if st.Status != 0 {
		writeJSON(w, st.Status, apiError(fmt.Sprintf("the stand-in answers HTTP %d", st.Status), "server_error", ""))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	id := fmt.Sprintf("resp_%d", n)
	event := func(v map[string]any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], data)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if st.Failed != "" {
		event(map[string]any{"type": "response.failed", "response": map[string]any{
			"id": id, "error": map[string]any{"code": st.Failed, "message": "the stand-in failed: " + st.Failed}}})
		return
	}
	item := map[string]any{"type": "message", "role": "assistant", "id": "msg_" + id,
		"content": []map[string]any{{"type": "output_text", "text": st.Text}}}
	if st.Exec != "" {
		args, _ := json.Marshal(map[string]string{"cmd": st.Exec})
		item = map[string]any{"type": "function_call", "name": "exec_command", "call_id": "call_" + id, "arguments": string(args)}
	}
	event(map[string]any{"type": "response.output_item.done", "item": item})
	event(map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "usage": map[string]any{
		"input_tokens": 5, "input_tokens_details": nil, "output_tokens": 3, "output_tokens_details": nil, "total_tokens": 8}}})
}

// take returns the step for the next responses request.
func (s *Server) take() Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sticky != nil {
		return *s.sticky
	}
	if s.next >= len(s.steps) {
		return Text("(script done)")
	}
	st := s.steps[s.next]
	s.next++
	if st.Status != 0 {
		s.sticky = &st
	}
	return st
}

func apiError(msg, typ, code string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Package fakeapi is a local stand-in for the Anthropic Messages API, for
// tests that drive the real Claude Code CLI: it answers POST /v1/messages
// (streaming SSE when the request asks for it, one JSON message otherwise),
// POST /v1/messages/count_tokens and Claude Code's connectivity probe
// (HEAD /), from a script the test gives: text replies, tool_use blocks, a
// stall, HTTP errors. Every request is recorded for the test to inspect.
// Side requests, which the interactive CLI makes besides the conversation
// (a session's title: no tools, structured output), take no step of the
// script: they are answered apart (Side).
//
// The CLI reaches it through ANTHROPIC_BASE_URL (Env gives the variables).
// It listens on 127.0.0.1, so a jail that shares the host's network
// namespace reaches it too.
//
// It is imported by tests only, and it must not grow into a model: a reply
// is exactly what the script says.
package fakeapi

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Step is the answer to one POST /v1/messages.
type Step struct {
	// Text is a text block.
	Text string
	// Tool, when set, is a tool_use block after the text; the reply then
	// stops with stop_reason tool_use, and the CLI sends the tool's result
	// in its next request, which the next step answers.
	Tool *ToolCall
	// Stall delays the answer: with a streaming request the headers and
	// message_start go out first, then nothing for Stall (or until the
	// client goes away), as a model call that hangs mid-stream.
	Stall time.Duration
	// Status, when not 0, answers with this HTTP status and an Anthropic
	// error body instead of a message. An error step is sticky: it
	// answers every later request too (the CLI retries).
	Status int
	// Before, when set, runs on the stand-in's side (the test's, on the
	// host) before the answer goes out (an error step's, before each
	// answer): a test's hook for changing the world at a known point of a
	// run.
	Before func()
}

// ToolCall is one tool_use block.
type ToolCall struct {
	Name  string
	Input map[string]any
}

// Text is a reply with one text block.
func Text(s string) Step { return Step{Text: s} }

// Tool is a reply that calls a tool (Bash, Write, Edit, ...) with input.
func Tool(name string, input map[string]any) Step {
	return Step{Tool: &ToolCall{Name: name, Input: input}}
}

// Stall is a reply that starts and then hangs for d before its text.
func Stall(d time.Duration) Step { return Step{Stall: d, Text: "(stalled)"} }

// Fail answers with an HTTP error status (429, 500, 529, ...), now and for
// every later request.
func Fail(status int) Step { return Step{Status: status} }

// Request is one request the server received.
type Request struct {
	Method, Host, Path string
	Header             http.Header
	Body               []byte
	// Side: a side request (isSide), answered apart from the script.
	Side bool
}

// Message is the decoded body of a messages request (what tests look at).
type Message struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	// OutputConfig asks for structured output (a JSON schema).
	OutputConfig json.RawMessage `json:"output_config"`
}

// SideTitle is the answer to every side request: the session title the
// interactive CLI asks for (claude 2.1.197's generate_session_title, sent
// before the first turn for a prompt of 10 characters or more), as the
// JSON it parses.
const SideTitle = `{"title":"stand-in"}`

// isSide reports whether a messages request is a side request: one with
// no tools that asks for structured output.
func isSide(m Message) bool {
	return len(m.Tools) == 0 && len(m.OutputConfig) > 0 && string(m.OutputConfig) != "null"
}

// ToolResult is a tool_result block the CLI sent back.
type ToolResult struct {
	ToolUseID string
	Content   string
	IsError   bool
}

// Server is a running stand-in.
type Server struct {
	// URL is the base URL (ANTHROPIC_BASE_URL).
	URL string

	mu       sync.Mutex
	steps    []Step
	next     int
	lastBody []byte // the last main messages request's
	last     Step   // and the step that answered it
	sticky   *Step
	requests []Request
	ids      int
	srv      *http.Server
	stop     chan struct{}
	ca       *ca    // set by ProxyEnv
	grant    *grant // set by RefreshTo
}

// New starts a server that answers the main messages requests with steps,
// in order; past the last step it answers "(script done)". It is closed
// when the test ends.
func New(t testing.TB, steps ...Step) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), steps: steps, stop: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	t.Cleanup(s.Close)
	return s
}

// Close stops the server; stalled replies end at once.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Env is the environment that points Claude Code at the server, with a
// dummy API key and its background traffic off.
func (s *Server) Env() []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=sk-ant-fakeapi-0000",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Turns says, for a test's failure message, how long the conversation was
// in each main messages request, in order ("2 4 4 6": the second turn
// was asked twice).
func (s *Server) Turns() string {
	var n []string
	for _, m := range s.Messages() {
		n = append(n, strconv.Itoa(len(m.Messages)))
	}
	return strings.Join(n, " ")
}

// Messages returns the decoded bodies of the messages requests (not
// count_tokens, not side requests) received so far.
func (s *Server) Messages() []Message {
	var out []Message
	for _, r := range s.Requests() {
		if r.Method != http.MethodPost || !isMessages(r.Path) || r.Side {
			continue
		}
		var m Message
		json.Unmarshal(r.Body, &m)
		out = append(out, m)
	}
	return out
}

// ToolResults returns every tool_result block the CLI sent, in order.
func (s *Server) ToolResults() []ToolResult {
	var out []ToolResult
	seen := map[string]bool{}
	for _, m := range s.Messages() {
		for _, msg := range m.Messages {
			var blocks []struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
				IsError   bool            `json:"is_error"`
			}
			if json.Unmarshal(msg.Content, &blocks) != nil {
				continue
			}
			for _, b := range blocks {
				if b.Type != "tool_result" || seen[b.ToolUseID] {
					continue
				}
				seen[b.ToolUseID] = true
				out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: contentText(b.Content), IsError: b.IsError})
			}
		}
	}
	return out
}

// contentText flattens a tool_result's content: a string, or text blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

func isMessages(path string) bool {
	p, _, _ := strings.Cut(path, "?")
	return p == "/v1/messages"
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Host: r.Host, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()

	path := r.URL.Path
	switch {
	case r.Method == http.MethodConnect:
		s.tunnel(w, r)
	case r.Method == http.MethodPost && path == "/v1/oauth/token":
		s.mu.Lock()
		g := s.grant
		s.mu.Unlock()
		if g == nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": "the stand-in grants no refresh (RefreshTo)"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"access_token": g.access, "refresh_token": g.refresh, "expires_in": int(g.expiresIn.Seconds()),
			"token_type": "Bearer", "scope": "user:inference user:profile"})
	case r.Method == http.MethodHead || r.Method == http.MethodGet && path == "/":
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 1 + len(body)/4})
	case r.Method == http.MethodPost && path == "/v1/messages":
		var req Message
		if err := json.Unmarshal(body, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", "body is not JSON: "+err.Error()))
			return
		}
		if isSide(req) {
			s.mu.Lock()
			s.requests[len(s.requests)-1].Side = true
			s.mu.Unlock()
			s.answer(w, r, req, Text(SideTitle))
			return
		}
		st := s.take(body)
		if st.Before != nil {
			st.Before()
		}
		s.answer(w, r, req, st)
	default:
		writeJSON(w, http.StatusNotFound, apiError("not_found_error", "the stand-in does not serve "+r.Method+" "+path))
	}
}

// take returns the step for the next messages request, whose body is
// body. A request with the body of the one before is the CLI retrying it
// (a connection that broke, a client timeout under load): it gets the
// same step again, its Before hook not run twice, and the script does
// not move on.
func (s *Server) take(body []byte) Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sticky != nil {
		return *s.sticky
	}
	if s.lastBody != nil && bytes.Equal(body, s.lastBody) {
		st := s.last
		st.Before = nil
		return st
	}
	st := Text("(script done)")
	if s.next < len(s.steps) {
		st = s.steps[s.next]
		s.next++
	}
	s.lastBody, s.last = body, st
	if st.Status != 0 {
		s.sticky = &st
	}
	return st
}

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_fake%04d", prefix, s.ids)
}

func apiError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func errorType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	default:
		return "api_error"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// answer writes one step as the reply to req.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req Message, st Step) {
	if st.Status != 0 {
		if st.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.Header().Set("Request-Id", s.id("req"))
		writeJSON(w, st.Status, apiError(errorType(st.Status), fmt.Sprintf("the stand-in answers HTTP %d", st.Status)))
		return
	}
	model := req.Model
	if model == "" {
		model = "claude-fake"
	}
	var content []map[string]any
	if st.Text != "" || st.Tool == nil {
		content = append(content, map[string]any{"type": "text", "text": st.Text})
	}
	stop := "end_turn"
	if st.Tool != nil {
		input := st.Tool.Input
		if input == nil {
			input = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": s.id("toolu"), "name": st.Tool.Name, "input": input})
		stop = "tool_use"
	}
	msgID := s.id("msg")
	usage := map[string]any{"input_tokens": 5, "output_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		s.wait(r, st.Stall)
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 1},
	}})
	flush()
	s.wait(r, st.Stall)
	for i, c := range content {
		switch c["type"] {
		case "text":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		case "tool_use":
			in, _ := json.Marshal(c["input"])
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 3}})
	event("message_stop", map[string]any{})
	flush()
}

// wait stalls for d, or until the client or the server goes away.
func (s *Server) wait(r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.stop:
	}
}

// Side returns the side requests received so far.
func (s *Server) Side() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Side {
			out = append(out, r)
		}
	}
	return out
}

// Dump renders the requests for a test's failure message.
func (s *Server) Dump() string {
	var b bytes.Buffer
	for _, r := range s.Requests() {
		fmt.Fprintf(&b, "%s %s%s %.300s\n", r.Method, r.Host, r.Path, r.Body)
	}
	return b.String()
}

// ProxyEnv makes the server an HTTPS proxy as well, one that answers for
// every host itself (TLS with certificates of its own CA, written to
// dir/ca.pem): the environment it returns sends Claude Code's traffic to
// other hosts — its OAuth token refresh at platform.claude.com — to the
// stand-in, with the CA trusted through NODE_EXTRA_CA_CERTS. The API itself
// stays direct (NO_PROXY). dir must be visible where claude runs.
func (s *Server) ProxyEnv(t testing.TB, dir string) []string {
	t.Helper()
	ca, err := newCA()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.ca = ca
	s.mu.Unlock()
	return []string{"HTTPS_PROXY=" + s.URL, "https_proxy=" + s.URL, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "NODE_EXTRA_CA_CERTS=" + caFile}
}

// RefreshTo makes POST /v1/oauth/token (through the proxy) grant a new
// login: this access token and refresh token, valid for expiresIn.
func (s *Server) RefreshTo(access, refresh string, expiresIn time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grant = &grant{access, refresh, expiresIn}
}

type grant struct {
	access, refresh string
	expiresIn       time.Duration
}

// tunnel answers a CONNECT: the stand-in itself plays the host, over TLS.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ca := s.ca
	s.mu.Unlock()
	hj, ok := w.(http.Hijacker)
	if ca == nil || !ok {
		http.Error(w, "the stand-in is not a proxy (call ProxyEnv)", http.StatusMethodNotAllowed)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	host, _, _ := net.SplitHostPort(r.Host)
	tlsConn := tls.Server(conn, &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := hello.ServerName
			if name == "" {
				name = host
			}
			return ca.leaf(name)
		},
		NextProtos: []string{"http/1.1"},
	})
	// One connection served by the same handler, the Host header telling
	// which host was asked for.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	srv.Serve(&oneConn{conn: tlsConn, done: make(chan struct{})})
}

// oneConn is a net.Listener that yields one connection, then blocks until
// that connection is closed.
type oneConn struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = &closeNotify{Conn: l.conn, done: l.done} })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

type closeNotify struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *closeNotify) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// ca is a throwaway certificate authority.
type ca struct {
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	pem   []byte
	mu    sync.Mutex
	leafs map[string]*tls.Certificate
}

func newCA() (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentjail test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leafs: map[string]*tls.Certificate{}}, nil
}

func (c *ca) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leafs[host]; ok {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key}
	c.leafs[host] = l
	return l, nil
}

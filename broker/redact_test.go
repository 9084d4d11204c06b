package broker

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestBrokerAPIRouteMasksEchoedCredentials: an upstream that echoes what
// it was sent (a debugging endpoint, a gateway's error page) had handed
// the jail the credential the route adds, in a header, a 1xx answer, a
// trailer or the body, plain or compressed. Each is masked now, the body
// keeping its length, and an answer that could not be read is refused.
func TestBrokerAPIRouteMasksEchoedCredentials(t *testing.T) {
	t.Parallel()
	var sawEncoding string
	up := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key") + r.Header.Get("Authorization")
		sawEncoding = r.Header.Get("Accept-Encoding")
		f := http.NewResponseController(rw)
		switch r.URL.Path {
		case "/base/headers":
			rw.Header().Set("X-Echo", "you sent "+key)
			rw.Header().Set("X-"+strings.TrimPrefix(key, "Bearer "), "as a name")
			rw.Header().Set("Trailer", "X-Trailer")
			rw.Header().Add("Link", key) // in the 103 too
			rw.WriteHeader(http.StatusEarlyHints)
			rw.Header().Del("Link")
			rw.WriteHeader(http.StatusOK)
			io.WriteString(rw, "ok")
			rw.Header().Set("X-Trailer", key)
		case "/base/split":
			// The key in two writes, flushed apart: two reads here.
			rw.Header().Set("Content-Length", fmt.Sprint(len("key: ")+len(key)+len(" end")))
			io.WriteString(rw, "key: "+key[:3])
			f.Flush()
			time.Sleep(20 * time.Millisecond)
			io.WriteString(rw, key[3:]+" end")
		case "/base/gzip":
			rw.Header().Set("Content-Encoding", "gzip")
			z := gzip.NewWriter(rw)
			io.WriteString(z, "zipped "+key)
			z.Close()
		case "/base/gzip2": // two codings: the transport's own decoding took off one
			rw.Header().Add("Content-Encoding", "gzip")
			rw.Header().Add("Content-Encoding", "gzip")
			var inner bytes.Buffer
			z := gzip.NewWriter(&inner)
			io.WriteString(z, "zipped twice "+key)
			z.Close()
			z = gzip.NewWriter(rw)
			z.Write(inner.Bytes())
			z.Close()
		case "/base/coding": // the key as a coding, quoted in the 502
			rw.Header().Set("Content-Encoding", key)
			io.WriteString(rw, "x")
		case "/base/br":
			rw.Header().Set("Content-Encoding", "br")
			io.WriteString(rw, "not really br "+key)
		}
	}))
	t.Cleanup(up.Close)
	w := newWorld(t, nil)
	w.b.cfg.Routes[0].Upstream, _ = url.Parse(up.URL + "/base")
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	do := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+w.addr+"/anthropic"+path, nil)
		req.Header.Set("X-Api-Key", "placeholder-key")
		req.Header.Set("Accept-Encoding", "br")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	leaks := func(what string, s ...string) {
		t.Helper()
		for _, x := range s {
			if strings.Contains(x, "REAL-KEY") {
				t.Errorf("%s: the credential reached the jail: %q", what, x)
			}
		}
	}

	resp, body := do("/headers")
	leaks("headers", strings.ToUpper(fmt.Sprint(resp.Header)), fmt.Sprint(resp.Trailer), body)
	if got := resp.Header.Get("X-Echo"); got != "you sent xxxxxxxx" || resp.Header.Get("X-xxxxxxxx") != "as a name" || resp.Trailer.Get("X-Trailer") != "xxxxxxxx" {
		t.Errorf("headers %v, trailers %v: want each credential masked", resp.Header, resp.Trailer)
	}
	var hints []string
	req, _ := http.NewRequest("GET", "http://"+w.addr+"/anthropic/headers", nil)
	req.Header.Set("X-Api-Key", "placeholder-key")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, fmt.Sprint(code, h))
			return nil
		}}))
	if resp, err := client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if len(hints) != 1 || !strings.Contains(hints[0], "xxxxxxxx") {
		t.Errorf("103 headers %q, want one with the credential masked", hints)
	}
	leaks("103", hints...)

	resp, body = do("/split")
	if body != "key: xxxxxxxx end" || resp.ContentLength != int64(len(body)) {
		t.Errorf("split: %q (Content-Length %d), want the key masked across the reads, the length kept", body, resp.ContentLength)
	}
	resp, body = do("/gzip")
	if body != "zipped xxxxxxxx" || sawEncoding != "gzip" || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip: %q (upstream asked for %q, answered in %q), want it asked in gzip and read plain", body, sawEncoding, resp.Header.Get("Content-Encoding"))
	}
	resp, body = do("/coding")
	leaks("a coding", strings.ToUpper(body))
	for _, path := range []string{"/gzip2"} {
		resp, body = do(path)
		leaks(path, body)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `Content-Encoding "gzip, gzip", which agentjail does not read`) {
			t.Errorf("%s: %d %q, want 502 saying why", path, resp.StatusCode, body)
		}
	}
	req, _ = http.NewRequest("HEAD", "http://"+w.addr+"/anthropic/gzip", nil)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD of a gzip answer: %v %v", resp, err)
	}
	resp, body = do("/br")
	leaks("br", body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, `Content-Encoding "br", which agentjail does not read`) {
		t.Errorf("an answer in a coding not asked for: %d %q, want 502 saying why", resp.StatusCode, body)
	}
	// An echo that is no HTTP server: the transport's error quotes the
	// line it could not read.
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
				if k, ok := strings.CutPrefix(line, "X-Api-Key: "); ok {
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nkey %s", k)
				}
			}
			c.Close()
		}
	}()
	w.b.cfg.Routes[0].Upstream, _ = url.Parse("http://" + raw.Addr().String())
	resp, body = do("/echo")
	leaks("a malformed answer", body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "xxxxxxxx") {
		t.Errorf("an echo that is no HTTP: %d %q, want 502 quoting the masked line", resp.StatusCode, body)
	}
	w.b.cfg.Routes[0].Upstream, _ = url.Parse(up.URL + "/base")

	resp, body = do("/headers", "Connection", "Upgrade", "Upgrade", "websocket")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "takes no protocol upgrade") {
		t.Errorf("an upgrade: %d %q, want 400", resp.StatusCode, body)
	}
}

// TestRedactedBody reads bodies in every size of read, a credential
// across each boundary, whole or in part: an echo that cuts what it
// quotes let the jail choose where the cut falls in the key, and read all
// of it but a byte. Whatever the reads, no run of a secret as long as its
// fragment shows, and what is no secret's stays.
func TestRedactedBody(t *testing.T) {
	t.Parallel()
	long, short := "sk-ant-0123456789abcdefghijklmnop", "Zq7-Wv2!"
	r := newRedactor([]string{long, short})
	hid := func(n int) string { return strings.Repeat("#", n) }
	for _, c := range []struct{ in, want string }{
		{"x " + long + " y " + long, "x " + hid(len(long)) + " y " + hid(len(long))},
		{short + "?", hid(len(short)) + "?"},
		{"key " + long[:20], "key " + hid(20)},               // cut by the echo, at its end
		{"key " + long[:9] + "...", "key " + hid(9) + "..."}, // 8 of 32 is a fragment
		{"key " + long[:7] + "...", "key sk-ant-..."},        // 7 is not
		{"sk-ant-" + long[:20], "sk-ant-" + hid(20)},
		{"data: {\"x\": 1}\n\n", "data: {\"x\": 1}\n\n"},
		{"", ""},
	} {
		for _, size := range []int{1, 2, 7, 4096} {
			in := io.NopCloser(iotest.OneByteReader(strings.NewReader(c.in)))
			if size > 1 {
				in = io.NopCloser(iotest.HalfReader(strings.NewReader(c.in)))
			}
			got, err := io.ReadAll(&limitedReads{&redactedBody{ReadCloser: in, r: r}, size})
			if err != nil || len(got) != len(c.want) {
				t.Errorf("%q in reads of %d: %q %v", c.in, size, got, err)
				continue
			}
			for i := range got { // # is any mask byte
				if c.want[i] == '#' && got[i] == c.in[i] && got[i] != 'x' || c.want[i] != '#' && got[i] != c.want[i] {
					t.Errorf("%q in reads of %d: %q, want %q (# masked)", c.in, size, got, c.want)
					break
				}
			}
		}
	}
	if b := []byte("data: x\n\n"); r.heldBack(b) != 0 {
		t.Error("an event's end was held")
	}
	if newRedactor([]string{""}) != nil {
		t.Error("a redactor of no credential")
	}
}

// limitedReads reads at most n bytes a call.
type limitedReads struct {
	r io.Reader
	n int
}

func (l *limitedReads) Read(p []byte) (int, error) { return l.r.Read(p[:min(len(p), l.n)]) }

// TestBrokerAPIRouteGoesOnlyWhereTheAPIIs: a gateway upstream that
// routes by a request header (Helicone-Target-Url) sent the credential the
// route adds to a host the jail named, and the route took an OAuth login
// anywhere on the API's host (minting keys, the account's cloud
// sessions). Now a route forwards the headers the agents' APIs use, adds
// the operator's own (ANTHROPIC_CUSTOM_HEADERS), masked in the answers
// like the credentials, and serves only its API's paths.
func TestBrokerAPIRouteGoesOnlyWhereTheAPIIs(t *testing.T) {
	t.Parallel()
	var got http.Header
	var gotPath string
	up := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got, gotPath = r.Header.Clone(), r.URL.RequestURI()
		fmt.Fprintf(rw, "gateway key %s provider %s flag %s", r.Header.Get("X-Portkey-Api-Key"), r.Header.Get("X-Portkey-Provider"), r.Header.Get("X-Flag"))
	}))
	t.Cleanup(up.Close)
	w := newWorld(t, nil)
	rt := &w.b.cfg.Routes[0]
	rt.Upstream, _ = url.Parse(up.URL)
	rt.Headers = http.Header{"X-Portkey-Api-Key": {"GW-SECRET"}, "X-Portkey-Provider": {"anthropic"}, "X-Flag": {"1"}}
	for _, k := range []string{"X-Gateway-JWT", "X-Authentication", "X-ApiToken", "X-Gw-Passphrase", "X-Portkey-Config"} {
		if !credentialHeader(k) {
			t.Errorf("%s is not taken for a credential's header", k)
		}
	}
	if credentialHeader("X-Portkey-Provider") || credentialHeader("Anthropic-Beta") {
		t.Error("a provider's or a beta's header taken for a credential's")
	}
	rt.Paths = []string{"POST v1/messages", "GET v1/models"}
	rt.Upstream.RawQuery = "api-version=7" // the operator's, kept
	send := func(path string, method ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(append(method, "POST")[0], "http://"+w.addr+"/anthropic"+path, strings.NewReader("{}"))
		for k, v := range map[string]string{"X-Api-Key": "placeholder-key", "Anthropic-Beta": "b1", "Anthropic-Version": "2023-06-01",
			"X-Stainless-Os": "Linux", "X-App": "cli", "Content-Type": "application/json",
			"Helicone-Target-Url": "http://evil.test/", "X-Original-URL": "/evil", "X-Forwarded-Host": "evil.test",
			"X-HTTP-Method-Override": "TRACE", "X-Portkey-Api-Key": "the-agents-own"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	code, body := send("/v1/messages")
	if code != 200 || body != "gateway key xxxxxxxxx provider anthropic flag 1" {
		t.Errorf("answer %d %q, want 200 with the gateway's key masked, its other headers not", code, body)
	}
	for _, k := range []string{"Anthropic-Beta", "Anthropic-Version", "X-Stainless-Os", "X-App", "Content-Type"} {
		if got.Get(k) == "" {
			t.Errorf("the upstream did not get %s", k)
		}
	}
	for _, k := range []string{"Helicone-Target-Url", "X-Original-Url", "X-Forwarded-Host", "X-Http-Method-Override"} {
		if v := got.Get(k); v != "" {
			t.Errorf("the upstream got %s: %s", k, v)
		}
	}
	if got.Get("X-Api-Key") != "REAL-KEY" || fmt.Sprint(got["X-Portkey-Api-Key"]) != "[GW-SECRET]" {
		t.Errorf("the upstream got key %q and gateway key %q, want the operator's", got.Get("X-Api-Key"), got["X-Portkey-Api-Key"])
	}
	if code, _ := send("/v1/messages/count_tokens?beta=true"); code != 200 || gotPath != "/v1/messages/count_tokens?api-version=7&beta=true" {
		t.Errorf("below an API path: %d %s", code, gotPath)
	}
	// A lone %25 decoded once is "%", which escaped again does not parse:
	// the upstream's own path went out, with the credential.
	if code, _ := send("/v1/messages/%25"); code != 200 || gotPath != "/v1/messages/%25?api-version=7" {
		t.Errorf("an escaped %%: %d, the upstream saw %s", code, gotPath)
	}
	gotPath = ""
	for _, c := range [][2]string{{"POST", "/api/oauth/claude_cli/create_api_key"}, {"POST", "/v1/code/triggers"}, {"POST", "/v1/messagesx"},
		{"POST", "/"}, {"POST", "/v1"}, {"GET", "/v1/messages/batches"}, {"DELETE", "/v1/models/ft:x"}} {
		if code, body := send(c[1], c[0]); code != http.StatusForbidden || !strings.Contains(body, "serves POST v1/messages, GET v1/models, not "+c[0]) || gotPath != "" {
			t.Errorf("%s %s: %d %q (upstream saw %q), want 403 naming what is served", c[0], c[1], code, body, gotPath)
		}
	}
}

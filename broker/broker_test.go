package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	host := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
	for addr, want := range map[string]string{
		"169.254.169.254":        "link-local",
		"127.0.0.53":             "loopback",
		"0.0.0.0":                "unspecified",
		"10.1.2.3":               "private",
		"172.31.255.255":         "private",
		"192.168.1.1":            "private",
		"100.100.100.200":        "cgnat",
		"168.63.129.16":          "metadata",
		"192.0.0.192":            "reserved",
		"255.255.255.255":        "reserved",
		"224.0.0.251":            "multicast",
		"::":                     "unspecified",
		"::1":                    "loopback",
		"fe80::1":                "link-local",
		"fd00:ec2::254":          "private",
		"::ffff:169.254.169.254": "link-local",
		"::ffff:127.0.0.1":       "loopback",
		"64:ff9b::a9fe:a9fe":     "link-local", // NAT64 of 169.254.169.254
		"2002:7f00:1::":          "loopback",   // 6to4 of 127.0.0.1
		"::127.0.0.1":            "reserved",
		"203.0.113.7":            "host-address",
		"::ffff:203.0.113.7":     "host-address",
		"93.184.216.34":          "",
		"2606:2800:220:1::":      "",
		"::ffff:93.184.216.34":   "",
	} {
		if got := classify(netip.MustParseAddr(addr), host); got != want {
			t.Errorf("classify(%s) = %q, want %q", addr, got, want)
		}
	}
	for class, want := range map[string]string{"host-address": "one of the host's own addresses", "unspecified": "an unspecified address", "loopback": "a loopback address"} {
		if got := classText(class); got != want {
			t.Errorf("classText(%s) = %q, want %q", class, got, want)
		}
	}
}

// world is a broker in front of servers on the test's loopback, with a
// resolver of its own: allowed.test and sub.wild.test are the servers
// (their address named by an entry, as a loopback address must be);
// meta.test resolves to the metadata address, loop.test to loopback.
type world struct {
	b       *Broker
	addr    string // the broker's
	plain   *httptest.Server
	tlsSrv  *httptest.Server
	refused []string
	saw     string // what plain was last sent, as it answers
	mu      sync.Mutex
}

// lastSent is what the plain server was sent last.
func (w *world) lastSent() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.saw
}

func newWorld(t testing.TB, extra func(*Config)) *world {
	t.Helper()
	w := &world{}
	w.plain = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		saw := fmt.Sprintf("plain %s %s key=%s auth=%s", r.Method, r.URL.Path, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
		w.mu.Lock()
		w.saw = saw
		w.mu.Unlock()
		io.WriteString(rw, saw) // an echo: an API route masks the credential in it
	}))
	w.tlsSrv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "tls %s", r.Host)
	}))
	t.Cleanup(w.plain.Close)
	t.Cleanup(w.tlsSrv.Close)
	_, plainPort, _ := net.SplitHostPort(w.plain.Listener.Addr().String())
	_, tlsPort, _ := net.SplitHostPort(w.tlsSrv.Listener.Addr().String())
	var rules []policy.NetRule
	for _, e := range []string{"allowed.test:" + plainPort, "allowed.test:" + tlsPort, "*.wild.test:" + tlsPort,
		"127.0.0.1:" + plainPort, "127.0.0.1:" + tlsPort, "meta.test:80", "loop.test:" + plainPort, "localhost:80", "app.localhost:80"} {
		r, err := policy.ParseNetRule(e)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	upstream, _ := url.Parse(w.plain.URL + "/base")
	cfg := Config{
		Rules: rules,
		Routes: []Route{{Name: "anthropic", Upstream: upstream,
			Secrets: map[string]string{"placeholder-key": "REAL-KEY", "placeholder-token": "REAL-TOKEN"}}},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "allowed.test", "sub.wild.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			case "meta.test":
				return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
			case "loop.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Say: func(hp, why string) {
			w.mu.Lock()
			w.refused = append(w.refused, hp+" "+why)
			w.mu.Unlock()
		},
	}
	if extra != nil {
		extra(&cfg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, bp, _ := net.SplitHostPort(l.Addr().String())
	cfg.Port, _ = strconv.Atoi(bp)
	w.b = New(cfg)
	w.b.Serve(l)
	w.addr = l.Addr().String()
	return w
}

// client is an HTTP client that uses the broker as its proxy and trusts
// the TLS test server.
func (w *world) client() *http.Client {
	pool := w.tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: w.addr}),
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
	}, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func port(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// TestBrokerAllowsAndRefuses: allowed names are tunnelled (CONNECT) and
// forwarded (plain HTTP) to the address checked; a name no entry covers,
// and names that resolve to metadata or loopback addresses, get 403 with
// the entry to add, said once each; the record has every one.
func TestBrokerAllowsAndRefuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	c := w.client()
	if code, body := get(t, c, "https://allowed.test:"+port(w.tlsSrv)+"/"); code != 200 || body != "tls allowed.test:"+port(w.tlsSrv) {
		t.Errorf("CONNECT allowed.test: %d %q", code, body)
	}
	if code, body := get(t, c, "https://sub.wild.test:"+port(w.tlsSrv)+"/"); code != 200 {
		t.Errorf("CONNECT sub.wild.test: %d %q", code, body)
	}
	if code, body := get(t, c, "http://allowed.test:"+port(w.plain)+"/x"); code != 200 || body != "plain GET /x key= auth=" {
		t.Errorf("GET http://allowed.test: %d %q", code, body)
	}
	for _, c2 := range []struct{ url, says string }{
		{"http://other.test:" + port(w.plain) + "/", `other.test:` + port(w.plain) + ` is not allowed; to allow it, add network.allow: ["other.test:` + port(w.plain) + `"] to the profile, or pass --allow-net other.test:` + port(w.plain)},
		{"http://meta.test/latest/meta-data", `meta.test resolves to 169.254.169.254, a link-local address`},
		{"http://loop.test:" + port(w.plain) + "/", `loop.test resolves to 127.0.0.2, a loopback address`},
		{"http://169.254.169.254/", `169.254.169.254 is a link-local address, which a jail reaches only where an entry names it; to allow it, add network.allow: ["169.254.169.254:80"]`},
		{"http://[::1]:" + port(w.plain) + "/", `::1 is a loopback address`},
	} {
		code, body := get(t, c, c2.url)
		if code != http.StatusForbidden || !strings.Contains(body, c2.says) {
			t.Errorf("GET %s: %d %q; want 403 saying %q", c2.url, code, body, c2.says)
		}
	}
	// CONNECT to a refused host: the client sees the 403.
	if _, err := c.Get("https://other.test/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT other.test: %v", err)
	}
	get(t, c, "http://other.test:"+port(w.plain)+"/again")
	rec := w.b.Close()
	if len(w.refused) != 6 || !strings.HasPrefix(w.refused[0], "other.test:"+port(w.plain)+" ") {
		t.Errorf("said refused: %q", w.refused)
	}
	if rec.Totals.Connections != 10 || rec.Totals.Allowed != 3 || rec.Totals.Refused != 7 || len(rec.Connections) != 10 || len(rec.RefusedHosts) != 6 {
		t.Errorf("totals %+v, %d recorded, refused hosts %q", rec.Totals, len(rec.Connections), rec.RefusedHosts)
	}
	byRule := map[string]int{}
	for _, x := range rec.Connections {
		byRule[x.Proto+" "+x.Rule]++
		if x.Allowed && (x.Addr != "127.0.0.1" || x.BytesDown == 0) {
			t.Errorf("allowed connection %+v: no address or bytes", x)
		}
	}
	for k, n := range map[string]int{"connect allowed.test:" + port(w.tlsSrv): 1, "connect *.wild.test:" + port(w.tlsSrv): 1, "http allowed.test:" + port(w.plain): 1,
		"http not-allowed": 2, "http link-local": 2, "http loopback": 2, "connect not-allowed": 1} {
		if byRule[k] != n {
			t.Errorf("%d records %q, want %d; all: %v", byRule[k], k, n, byRule)
		}
	}
}

// TestDecideLocalhost: localhost and the names under it are loopback
// without the resolver (which knows neither here), RFC 6761: allowed by
// name, they are still refused as loopback.
func TestDecideLocalhost(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, host := range []string{"localhost", "app.localhost", "LOCALHOST."} {
		v := w.b.decide(context.Background(), "http", host, 80)
		want := strings.TrimSuffix(strings.ToLower(host), ".") + " resolves to 127.0.0.1, a loopback address"
		if v.allowed || !strings.Contains(v.why, want) {
			t.Errorf("%s: allowed %v, why %q; want refused: %q", host, v.allowed, v.why, want)
		}
	}
}

// TestBrokerAPIRoute: a request for the broker itself goes to the route's
// upstream, under its base path, with the placeholders swapped for the
// real credentials and any other credential dropped.
func TestBrokerAPIRoute(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, c := range []struct {
		header, value, want string
	}{
		{"X-Api-Key", "placeholder-key", "key=REAL-KEY auth="},
		{"Authorization", "Bearer placeholder-token", "key= auth=Bearer REAL-TOKEN"},
		{"X-Api-Key", "sk-ant-the-agents-own", "key= auth="},
		{"Authorization", "Bearer the-agents-own", "key= auth="},
	} {
		req, _ := http.NewRequest("POST", "http://"+w.addr+"/anthropic/v1/messages?beta=true", strings.NewReader("{}"))
		req.Header.Set(c.header, c.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want, saw := "plain POST /base/v1/messages "+c.want, w.lastSent(); saw != want {
			t.Errorf("%s: %s: upstream saw %q, want %q", c.header, c.value, saw, want)
		}
		if strings.Contains(string(body), "REAL-") {
			t.Errorf("%s: %s: the upstream's echo %q reached the jail", c.header, c.value, body)
		}
	}
	// A TRACE would come back with the real key in it, in any spelling.
	for _, m := range []string{"TRACE", "trace", "TRACK"} {
		req, _ := http.NewRequest(m, "http://"+w.addr+"/anthropic/v1/messages", nil)
		req.Header.Set("X-Api-Key", "placeholder-key")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %v %v", m, resp, err)
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "REAL-KEY") {
				t.Errorf("%s answered with the key: %q", m, body)
			}
		}
	}
	// Nor through a method override header.
	req, _ := http.NewRequest("POST", "http://"+w.addr+"/anthropic/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-HTTP-Method-Override", "TRACE")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(body), "plain POST ") {
			t.Errorf("an override header: %q", body)
		}
	}
	// Through the proxy variables too (absolute form, for the broker).
	if code, body := get(t, w.client(), "http://"+w.addr+"/anthropic/x"); code != 200 || body != "plain GET /base/x key= auth=" {
		t.Errorf("absolute form for the broker: %d %q", code, body)
	}
	if code, body := get(t, http.DefaultClient, "http://"+w.addr+"/nothing/here"); code != 404 || !strings.Contains(body, "/anthropic/") {
		t.Errorf("no route: %d %q", code, body)
	}
	if code, _ := get(t, http.DefaultClient, "http://"+w.addr+PingPath); code != 200 {
		t.Errorf("ping: %d", code)
	}
	// Below the upstream's path, never beside it.
	for _, p := range []string{"/anthropic/../x", "/anthropic/%2e%2e/x", "/anthropic/v1/..%2F..%2Fx", "/anthropic/./x",
		"/anthropic/%252e%252e/x", "/anthropic/.%252E/x", "/anthropic/..;/x", "/anthropic/..%5Cx", "/anthropic/%2E%2E;a=b/x"} {
		if code, body := get(t, http.DefaultClient, "http://"+w.addr+p); code != 400 || !strings.Contains(body, "takes no . or .. in its path") {
			t.Errorf("%s: %d %q", p, code, body)
		}
	}
	// An upstream without a path of its own.
	w.b.cfg.Routes[0].Upstream, _ = url.Parse(w.plain.URL)
	if code, body := get(t, http.DefaultClient, "http://"+w.addr+"/anthropic/v1/models"); code != 200 || body != "plain GET /v1/models key= auth=" {
		t.Errorf("an upstream without a path: %d %q", code, body)
	}
	rec := w.b.Close()
	if rec.Totals.Connections != 7 || rec.Connections[0].Proto != "api" || rec.Connections[0].Rule != "api:anthropic" || rec.Connections[0].Status != 200 || rec.Connections[0].BytesUp != 2 {
		t.Errorf("record: %+v", rec)
	}
}

// TestBrokerAPIRouteFullDuplex: an API route streams the upstream's
// answer while the jail's request body is still being sent, as a real
// streaming API may (and as the transport does until it has read the
// body's EOF). A half-duplex broker closed the request body at the
// answer's first write, which cut the upstream connection and the
// answer: Claude Code and Codex retried or failed under load. An answer
// cut off mid-body is in the record too.
func TestBrokerAPIRouteFullDuplex(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.NewResponseController(rw).EnableFullDuplex()
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(http.StatusOK)
		fmt.Fprint(rw, "data: first\n\n")
		http.NewResponseController(rw).Flush()
		body, err := io.ReadAll(r.Body) // the rest of the request, sent after the first event
		fmt.Fprintf(rw, "data: read %d bytes, %v\n\n", len(body), err)
	}))
	t.Cleanup(up.Close)
	w := newWorld(t, nil)
	w.b.cfg.Routes[0].Upstream, _ = url.Parse(up.URL)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "http://"+w.addr+"/anthropic/v1/messages", pr)
	req.ContentLength = 8
	done := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, _ := br.ReadString('\n')
		if first != "data: first\n" {
			done <- "first event: " + first
			return
		}
		pw.Write([]byte("bodypart")) // only once the answer has begun
		pw.Close()
		rest, err := io.ReadAll(br)
		done <- fmt.Sprintf("%s %v", rest, err)
	}()
	select {
	case got := <-done:
		if want := "\ndata: read 8 bytes, <nil>\n\n <nil>"; got != want {
			t.Errorf("the answer through the API route: %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second): // a hang detector, not a timing
		pw.CloseWithError(errors.New("test over"))
		t.Fatal("the answer stalled: the broker does not stream an answer while the request body is still coming")
	}

	// An upstream that dies mid-answer: the jail's reader sees the cut,
	// and the record has the request with its error.
	cutUp := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Length", "1000")
		rw.WriteHeader(http.StatusOK)
		fmt.Fprint(rw, "only part")
		http.NewResponseController(rw).Flush()
		conn, _, _ := http.NewResponseController(rw).Hijack()
		conn.Close()
	}))
	t.Cleanup(cutUp.Close)
	w.b.cfg.Routes[0].Upstream, _ = url.Parse(cutUp.URL)
	if code, body := get(t, http.DefaultClient, "http://"+w.addr+"/anthropic/x"); code != 0 && !strings.Contains(body, "only part") {
		t.Errorf("a cut answer: %d %q", code, body)
	}
	// (Go's client retries the GET once on a cut connection.)
	rec := w.b.Close()
	cut := rec.Connections[1:]
	if len(cut) == 0 || slices.ContainsFunc(cut, func(c record.Connection) bool {
		return c.Error != "the response was cut off after 9 bytes: reading it from upstream: unexpected EOF" || c.BytesDown != 9
	}) {
		t.Errorf("record: %+v", rec.Connections)
	}
}

// TestBrokerSOCKS5: SOCKS5 CONNECT with the name resolved by the broker,
// judged like a CONNECT.
func TestBrokerSOCKS5(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	d, err := proxy.SOCKS5("tcp", w.addr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial("tcp", "allowed.test:"+port(w.plain))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /s HTTP/1.0\r\nHost: x\r\n\r\n")
	got, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(got), "plain GET /s") {
		t.Errorf("through SOCKS5: %q", got)
	}
	if _, err := d.Dial("tcp", "meta.test:80"); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("SOCKS5 to meta.test: %v", err)
	}
	// The record is in the order the connections ended: the tunnel ends
	// when the broker sees the close, which may come after the refusal.
	rec := w.b.Close()
	byHost := map[string]record.Connection{}
	for _, c := range rec.Connections {
		byHost[c.Host] = c
	}
	if a, m := byHost["allowed.test"], byHost["meta.test"]; rec.Totals.Connections != 2 || a.Proto != "socks5" || a.BytesDown == 0 || m.Proto != "socks5" || m.Rule != "link-local" {
		t.Errorf("record: %+v", rec.Connections)
	}
}

// TestBrokerUpstreamProxy: with the operator's proxy, tunnels and the API
// route go through it (it resolves the names), and the record says so.
func TestBrokerUpstreamProxy(t *testing.T) {
	t.Parallel()
	var seen []string
	var mu sync.Mutex
	corp := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Host+" "+r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
		if r.Method != http.MethodConnect {
			http.Error(rw, "not here", 500)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(rw, err.Error(), 502)
			return
		}
		jail, _, _ := http.NewResponseController(rw).Hijack()
		jail.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
		go io.Copy(up, jail)
		io.Copy(jail, up)
		jail.Close()
		up.Close()
	}))
	defer corp.Close()
	corpURL, _ := url.Parse(corp.URL)
	corpURL.User = url.UserPassword("op", "secret")
	w := newWorld(t, func(c *Config) {
		c.Proxy = func(u *url.URL) (*url.URL, error) {
			if u.Hostname() == "127.0.0.1" {
				return nil, nil // loopback is never proxied (httpproxy)
			}
			return corpURL, nil
		}
	})
	// The operator's proxy reaches the loopback server as "allowed.test"
	// only through its own resolver: here, by address.
	c := w.client()
	if code, body := get(t, c, "https://127.0.0.1:"+port(w.tlsSrv)+"/"); code != 200 {
		t.Errorf("direct by address: %d %q", code, body)
	}
	_, err := c.Get("https://allowed.test:" + port(w.tlsSrv) + "/")
	rec := w.b.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "CONNECT allowed.test:"+port(w.tlsSrv)+" Basic b3A6c2VjcmV0" {
		t.Errorf("the operator's proxy saw %q (%v)", seen, err)
	}
	for _, x := range rec.Connections {
		if (x.Host == "allowed.test") != (x.Via == "upstream-proxy") || x.Via != "" && x.Addr != "" || !x.Allowed {
			t.Errorf("record: %+v", x)
		}
	}
}

// TestBrokerCapsConnections: past MaxConns a connection gets 503 at once,
// and the broker keeps serving the others.
func TestBrokerCapsConnections(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *Config) { c.MaxConns = 3 })
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("G")) // a request that never ends
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // let the broker take them (no timing is asserted)
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("over the cap: %v, %v", resp, err)
	}
	c.Close()
	held[0].Close()
	// A slot is free again once the broker notices.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := get(t, http.DefaultClient, "http://"+w.addr+PingPath)
		if code == 200 || time.Now().After(deadline) {
			if code != 200 {
				t.Errorf("after a slot was freed: %d", code)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, h := range held[1:] {
		h.Close()
	}
	rec := w.b.Close()
	if !slices.Equal(rec.LimitsHit, []string{"max_connections"}) {
		t.Errorf("limits hit: %q", rec.LimitsHit)
	}
	if n := rec.Totals; n.OverLimit < 1 || n.Refused < n.OverLimit || n.Connections != n.Allowed+n.Refused {
		t.Errorf("totals %+v: the connection over the cap is not counted", n)
	}
}

// TestBrokerConnectFirstAndLater: a CONNECT that opens a connection is
// served as it arrives (sniff), with the bytes sent behind it (a request
// pipelined into the tunnel) passed on, a bad target answered 400 and
// headers past the cap 431; a CONNECT after another request on the same
// connection goes through the HTTP server, and tunnels too.
func TestBrokerConnectFirstAndLater(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	target := "127.0.0.1:" + port(w.plain)
	exchange := func(send string) (*bufio.Reader, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		go io.WriteString(c, send) // a large send would fill the buffers before the answer is read
		return bufio.NewReader(c), c
	}
	answer := func(br *bufio.Reader, method string) (int, string) {
		t.Helper()
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if method == http.MethodConnect && resp.StatusCode == 200 {
			return 200, ""
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	get := "GET /through HTTP/1.1\r\nHost: " + target + "\r\n\r\n"

	br, _ := exchange("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n" + get)
	if code, _ := answer(br, http.MethodConnect); code != 200 {
		t.Fatalf("CONNECT %s: %d", target, code)
	}
	if code, body := answer(br, http.MethodGet); code != 200 || body != "plain GET /through key= auth=" {
		t.Errorf("the request pipelined behind the CONNECT: %d %q", code, body)
	}

	br, _ = exchange("CONNECT nowhere HTTP/1.1\r\nHost: nowhere\r\n\r\n")
	if code, body := answer(br, http.MethodConnect); code != 400 || !strings.Contains(body, `CONNECT needs HOST:PORT, got "nowhere"`) {
		t.Errorf("CONNECT nowhere: %d %q", code, body)
	}

	br, _ = exchange("CONNECT " + target + " HTTP/1.1\r\nX-Big: " + strings.Repeat("x", maxHeader+8192) + "\r\n\r\n")
	if code, _ := answer(br, http.MethodConnect); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("CONNECT with %d bytes of headers: %d", maxHeader+8192, code)
	}

	br, c := exchange("GET " + PingPath + " HTTP/1.1\r\nHost: " + w.addr + "\r\n\r\n")
	if code, _ := answer(br, http.MethodGet); code != 200 {
		t.Fatalf("ping: %d", code)
	}
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	if code, _ := answer(br, http.MethodConnect); code != 200 {
		t.Fatalf("CONNECT after a request: %d", code)
	}
	io.WriteString(c, get)
	if code, body := answer(br, http.MethodGet); code != 200 || body != "plain GET /through key= auth=" {
		t.Errorf("through the CONNECT after a request: %d %q", code, body)
	}
	rec := w.b.Close()
	if rec.Totals.Allowed != 2 || rec.Totals.Connections != 2 {
		t.Errorf("totals %+v", rec.Totals)
	}
}

// TestBrokerSaysRefusalFirst: the refusal is said (Config.Refused, which
// agentjail prints on the operator's stderr) before the jail can read the
// answer, so the tool refused prints its own error after agentjail's line,
// not inside it (a curl's "curl: (56) ..." was split by it once); a second
// request for the same host while it is being said waits too. Refused here
// holds until the test has looked for answers that must not be there yet;
// CONNECT and SOCKS5 answered first without the order, plain HTTP was held
// by net/http's own buffering and is checked all the same.
func TestBrokerSaysRefusalFirst(t *testing.T) {
	t.Parallel()
	said, release := make(chan string), make(chan struct{})
	w := newWorld(t, func(c *Config) {
		c.Say = func(hp, why string) {
			said <- hp
			<-release
		}
		c.sayWait = time.Hour // only release answers here
	})
	for _, x := range []struct{ host, greet, send, answer string }{
		{"one.test:443", "", "CONNECT one.test:443 HTTP/1.1\r\nHost: one.test:443\r\n\r\n", "HTTP/1.1 403"},
		{"two.test:80", "", "GET http://two.test/ HTTP/1.1\r\nHost: two.test\r\n\r\n", "HTTP/1.1 403"},
		{"three.test:443", "\x05\x01\x00", "\x05\x01\x00\x03\x0athree.test\x01\xbb", "\x05\x02"},
	} {
		ask := func() net.Conn {
			c, err := net.Dial("tcp", w.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if x.greet != "" { // SOCKS5 answers its greeting before the request
				io.WriteString(c, x.greet)
				if got := make([]byte, 2); !readIs(c, got, "\x05\x00") {
					t.Fatalf("%s: greeting answered %q", x.host, got)
				}
			}
			io.WriteString(c, x.send)
			return c
		}
		first := ask()
		select {
		case hp := <-said:
			if hp != x.host {
				t.Errorf("said %q, want %q", hp, x.host)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the refusal was never said", x.host)
		}
		again := ask()
		for i, c := range []net.Conn{first, again} {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			early := make([]byte, 64)
			if n, err := c.Read(early); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s, request %d: the jail read %q (%v) while the refusal was being said", x.host, i+1, early[:n], err)
			}
		}
		release <- struct{}{}
		for i, c := range []net.Conn{first, again} {
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if got := make([]byte, len(x.answer)); !readIs(c, got, x.answer) {
				t.Errorf("%s, request %d: answer %q, want %q", x.host, i+1, got, x.answer)
			}
		}
	}
	w.b.Close()
}

// TestBrokerRefusalNotHeldBySay: a Refused that never returns (agentjail's
// stderr stalled) holds the jail's 403 sayWait at most, and Close as long.
func TestBrokerRefusalNotHeldBySay(t *testing.T) {
	t.Parallel()
	const wait = 200 * time.Millisecond
	stuck := make(chan struct{})
	defer close(stuck)
	w := newWorld(t, func(c *Config) {
		c.Say = func(hp, why string) { <-stuck }
		c.sayWait = wait
	})
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "CONNECT one.test:443 HTTP/1.1\r\nHost: one.test:443\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if got := make([]byte, 12); !readIs(c, got, "HTTP/1.1 403") {
		t.Fatalf("answer %q, want a 403", got)
	}
	if d := time.Since(start); d < wait {
		t.Errorf("answered after %v, before the refusal was said or sayWait (%v) had passed", d, wait)
	}
	closeWithin(t, w.b, "Close waits for a refusal that is never said")
}

// TestBrokerCloseWaitsForASay: a refusal whose answer gave up waiting for
// its line (sayWait) still has as long again to be said before Close
// returns, so that the line does not come after the run's own.
func TestBrokerCloseWaitsForASay(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Second
	release, said := make(chan struct{}), make(chan struct{})
	w := newWorld(t, func(c *Config) {
		c.Say = func(hp, why string) {
			<-release
			close(said)
		}
		c.sayWait = wait
	})
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT one.test:443 HTTP/1.1\r\nHost: one.test:443\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if got := make([]byte, 12); !readIs(c, got, "HTTP/1.1 403") {
		t.Fatalf("answer %q, want a 403", got)
	}
	closed := make(chan *record.Network, 1)
	go func() { closed <- w.b.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while the refusal was still being said")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return once the refusal was said") // a hang detector
	}
	select {
	case <-said:
	default:
		t.Error("Close returned before the refusal was said")
	}
}

// readIs reads len(buf) bytes from c and says whether they are want.
func readIs(c net.Conn, buf []byte, want string) bool {
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == want
}

// TestBrokerCloseEndsLookups: Close ends a CONNECT still waiting on its
// name's lookup (a resolver that answers only when asked to stop), on the
// sniffed path as on the HTTP server's.
func TestBrokerCloseEndsLookups(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{}, 2)
	w := newWorld(t, func(c *Config) {
		r, err := policy.ParseNetRule("slow.test:443")
		if err != nil {
			t.Fatal(err)
		}
		c.Rules = append(c.Rules, r)
		c.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			asked <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
	})
	for _, first := range []string{"", "GET " + PingPath + " HTTP/1.1\r\nHost: x\r\n\r\n"} {
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, first+"CONNECT slow.test:443 HTTP/1.1\r\nHost: slow.test:443\r\n\r\n")
	}
	<-asked
	<-asked
	closeWithin(t, w.b, "Close waits on a lookup")
}

// TestBrokerCloseEndsTunnels: Close ends a tunnel still open and returns.
func TestBrokerCloseEndsTunnels(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", port(w.plain))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	rec := closeWithin(t, w.b, "Close did not return with a tunnel open")
	if rec.Totals.Connections != 1 || rec.Connections[0].Rule != "127.0.0.1:"+port(w.plain) {
		t.Errorf("record %+v", rec.Connections)
	}
}

// closeWithin closes b and returns its record; a Close that has not
// returned in a minute fails the test with hang (a hang detector).
func closeWithin(t *testing.T, b *Broker, hang string) *record.Network {
	t.Helper()
	done := make(chan *record.Network, 1)
	go func() { done <- b.Close() }()
	select {
	case rec := <-done:
		return rec
	case <-time.After(time.Minute):
		t.Fatal(hang)
		return nil
	}
}

// TestListenerRefusesAgentjailsOwnNamespace: a listener in agentjail's own
// network namespace, or on the wrong address, is never served.
func TestListenerRefusesAgentjailsOwnNamespace(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, _ := l.(*net.TCPListener).File()
	defer f.Close()
	p, _ := strconv.Atoi(port(&httptest.Server{Listener: l}))
	if _, err := Listener(f, p); !errors.Is(err, ErrListener) || !strings.Contains(err.Error(), "agentjail's own network namespace") {
		t.Errorf("Listener(own namespace) = %v", err)
	}
	if _, err := Listener(f, p+1); !errors.Is(err, ErrListener) || !strings.Contains(err.Error(), "it listens on 127.0.0.1:") {
		t.Errorf("Listener(wrong port) = %v", err)
	}
	if _, err := Listener(os.Stdin, p); !errors.Is(err, ErrListener) {
		t.Errorf("Listener(stdin) = %v", err)
	}
}

// TestBrokerBodyToUnreachableUpstream: a request with a body for an
// upstream that cannot be reached (plain HTTP and the API route) gets its
// 502, and the connection serves the next request: net/http, with full
// duplex on, panicked on the body the transport never read and closed the
// connection (golang/go#68560), printing the panic on the operator's
// stderr.
func TestBrokerBodyToUnreachableUpstream(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String() // nothing listens there once l is closed
	l.Close()
	w := newWorld(t, func(c *Config) {
		r, err := policy.ParseNetRule(closed)
		if err != nil {
			t.Fatal(err)
		}
		c.Rules = append(c.Rules, r)
		up, _ := url.Parse("http://" + closed + "/v1")
		c.Routes = append(c.Routes, Route{Name: "gone", Upstream: up})
	})
	for _, target := range []string{"http://" + closed + "/x", "/gone/messages"} {
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\n\r\n{}", target, w.addr)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodPost})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d, want 502", target, resp.StatusCode)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", PingPath, w.addr)
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Errorf("%s: the next request on the connection: %v", target, err)
		} else if resp.StatusCode != 200 {
			t.Errorf("%s: the next request: %d", target, resp.StatusCode)
		}
		c.Close()
	}
}

// TestBrokerMalformedTargets: a SOCKS5 name may hold any bytes; one that
// is no host name, or a port 0, is refused as malformed, and the line the
// operator's terminal gets quotes it: no control byte of the jail's gets
// through, and no entry is suggested that could not be added.
func TestBrokerMalformedTargets(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	socks := func(name string, port uint16) byte {
		t.Helper()
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(name))}
		req = append(append(req, name...), byte(port>>8), byte(port))
		c.Write(req)
		var reply [12]byte
		if _, err := io.ReadFull(c, reply[:12]); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		return reply[3]
	}
	for _, tc := range []struct {
		name string
		port uint16
	}{
		{"\x1b]52;c;QlJPS0VS\x07.com", 443},
		{"x\nagentjail: the run ended: all good (exit 0)\n.com", 443},
		{"", 443},
		{"allowed.test", 0},
	} {
		if code := socks(tc.name, tc.port); code != socksNotAllowed {
			t.Errorf("%q:%d: reply %d, want %d", tc.name, tc.port, code, socksNotAllowed)
		}
	}
	rec := w.b.Close()
	if rec.Totals.Refused != 4 {
		t.Errorf("totals %+v", rec.Totals)
	}
	for _, c := range rec.Connections {
		if c.Rule != Malformed {
			t.Errorf("%q: rule %q, want %q", c.Host, c.Rule, Malformed)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) != 4 {
		t.Errorf("said %q", w.refused)
	}
	for _, said := range w.refused {
		why := said[strings.Index(said, ` "`)+1:] // after the raw host:port the test's Refused puts first
		if strings.ContainsFunc(why, func(r rune) bool { return r < 0x20 || r == 0x7f }) || strings.Contains(why, "to allow it") || !strings.Contains(why, "is not a host name") {
			t.Errorf("said %q", why)
		}
	}
}

// TestBrokerCapsRefusedHosts: a jail that asks for ever new names gets
// each refused, but past record.MaxRefusedHosts they are counted, not
// listed or said, and one line says so.
func TestBrokerCapsRefusedHosts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	c := w.client()
	const more = 5
	for i := range record.MaxRefusedHosts + more {
		if code, _ := get(t, c, fmt.Sprintf("http://h%d.test/", i)); code != http.StatusForbidden {
			t.Fatalf("h%d.test: %d", i, code)
		}
	}
	rec := w.b.Close()
	if len(rec.RefusedHosts) != record.MaxRefusedHosts || rec.RefusedHostsDropped != more || !slices.Contains(rec.LimitsHit, "max_refused_hosts") || rec.Totals.Refused != record.MaxRefusedHosts+more {
		t.Errorf("refused %d, dropped %d, limits %v, totals %+v", len(rec.RefusedHosts), rec.RefusedHostsDropped, rec.LimitsHit, rec.Totals)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) != record.MaxRefusedHosts+1 || !strings.Contains(w.refused[len(w.refused)-1], "hosts refused; the refusals of others are not said") {
		t.Errorf("said %d lines, the last %q", len(w.refused), w.refused[len(w.refused)-1])
	}
}

// TestBrokerSaysUnreachableOnce: an allowed host:port whose name does not
// resolve, or where nothing listens, gets a 502 and is said to the
// operator once, however often and however the jail asks (CONNECT, plain
// HTTP), with the rule that allowed it; it is not a refused host.
func TestBrokerSaysUnreachableOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := port(&httptest.Server{Listener: l})
	l.Close()
	w := newWorld(t, func(c *Config) {
		for _, e := range []string{"gone.test:80", "gone.test:443", "127.0.0.1:" + closed} {
			r, err := policy.ParseNetRule(e)
			if err != nil {
				t.Fatal(err)
			}
			c.Rules = append(c.Rules, r)
		}
	})
	c := w.client()
	for _, u := range []string{"http://gone.test/", "http://gone.test/again", "https://gone.test/", "https://gone.test/again",
		"http://127.0.0.1:" + closed + "/", "https://127.0.0.1:" + closed + "/"} {
		code, body := get(t, c, u)
		if strings.HasPrefix(u, "http:") && (code != http.StatusBadGateway || !strings.Contains(body, "cannot reach")) {
			t.Errorf("GET %s: %d %q, want 502", u, code, body)
		}
		if strings.HasPrefix(u, "https:") && (code != 0 || !strings.Contains(body, "Bad Gateway")) {
			t.Errorf("CONNECT for %s: %d %q, want 502", u, code, body)
		}
	}
	rec := w.b.Close()
	want := []string{
		"gone.test:80 gone.test:80 is allowed (gone.test:80) but cannot be reached: cannot resolve gone.test: lookup gone.test: no such host; the jail was answered 502",
		"gone.test:443 gone.test:443 is allowed (gone.test:443) but cannot be reached: cannot resolve gone.test: lookup gone.test: no such host; the jail was answered 502",
		"127.0.0.1:" + closed + " 127.0.0.1:" + closed + " is allowed (127.0.0.1:" + closed + ") but cannot be reached: ",
	}
	w.mu.Lock()
	said := slices.Clone(w.refused)
	w.mu.Unlock()
	slices.Sort(said)
	if len(said) != 3 || !strings.HasPrefix(said[0], want[2]) || said[1] != want[1] || said[2] != want[0] {
		t.Errorf("said:\n%s\nwant once each:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
	if len(rec.RefusedHosts) != 0 || rec.Totals.Allowed != 6 || rec.Totals.Refused != 0 {
		t.Errorf("refused hosts %q, totals %+v", rec.RefusedHosts, rec.Totals)
	}
	// A request its client gave up on (or one the run's end cut) is no
	// host that cannot be reached.
	if s := unreachable(record.Connection{Host: "up.test", Port: 443}, fmt.Errorf("dial tcp: %w", context.Canceled)); s != "" {
		t.Errorf("a canceled request is said: %q", s)
	}
}

// TestBrokerBoundsIdleUpstreams: a jail that closes its side after each
// plain HTTP request, each to a new host (a wildcard entry), leaves at
// most maxIdle connections to upstreams open for reuse, not one a host.
func TestBrokerBoundsIdleUpstreams(t *testing.T) {
	t.Parallel()
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	w := newWorld(t, func(c *Config) {
		// The loopback address each name resolves to is named by an
		// entry of its own, as loop.test's is.
		c.Rules = append(c.Rules, mustRule(t, "*.many.test:"+port(srv)), mustRule(t, "127.0.0.1:"+port(srv)))
		resolve := c.Resolve
		c.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".many.test") {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return resolve(ctx, host)
		}
	})
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: w.addr}), DisableKeepAlives: true}}
	for i := range 100 {
		if code, body := get(t, c, fmt.Sprintf("http://h%d.many.test:%s/", i, port(srv))); code != 200 {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	// Well before idleWait, when idle ones close anyway.
	waitUntil(t, idleWait/3, func() bool { return open.Load() <= maxIdle }, "the upstream connections to drop to %d, at %d", maxIdle, open.Load)
}

func mustRule(t *testing.T, e string) policy.NetRule {
	t.Helper()
	r, err := policy.ParseNetRule(e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitUntil polls cond for up to d, failing t with what (and now's value)
// if it never holds.
func waitUntil(t *testing.T, d time.Duration, cond func() bool, what string, limit int, now func() int64) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for "+what, d, limit, now())
		}
	}
}

// TestBrokerClipsWhatTheJailNames: a malformed host of 60 KB is refused
// and recorded, and said, cut to a host name's length; and nothing an
// upstream sends reaches the operator's stderr through net/http's own
// logging (the standard logger, which the broker silences).
func TestBrokerClipsWhatTheJailNames(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", 60000) + "!"
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n", long)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.Copy(io.Discard, c)
	c.Close()
	rec := w.b.Close()
	if len(rec.Connections) != 1 || len(rec.Connections[0].Host) > maxHostName+len("…") || rec.Connections[0].Rule != Malformed {
		t.Fatalf("recorded %+v", rec.Connections)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.refused) != 1 || len(w.refused[0]) > 1000 {
		t.Errorf("said %d lines, the first of %d bytes", len(w.refused), len(w.refused[0]))
	}
	if log.Writer() != io.Discard {
		t.Error("the standard logger writes to stderr")
	}
}

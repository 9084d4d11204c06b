package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentjail/agentjail/record"
)

// PingPath answers 200 on the broker's own address: what `agentjail
// doctor` asks from inside a jail.
const PingPath = "/agentjail/ping"

// ServeHTTP serves the jail's HTTP requests: CONNECT tunnels, requests
// in absolute form for other hosts (plain HTTP forwarding), and requests
// for the broker itself (the API routes).
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		http.Error(w, "agentjail: the run is ending", http.StatusServiceUnavailable)
		return
	}
	b.handlers.Add(1)
	b.mu.Unlock()
	defer b.handlers.Done()
	switch {
	case r.Method == http.MethodConnect:
		b.connect(w, r)
	case r.URL.IsAbs() && !b.isSelf(r.URL):
		b.forwardHTTP(w, r)
	default:
		b.route(w, r)
	}
}

// isSelf says whether an absolute URL names the broker itself.
func (b *Broker) isSelf(u *url.URL) bool {
	h := strings.ToLower(u.Hostname())
	return portOf(u) == b.cfg.Port && (h == "localhost" || h == "127.0.0.1" || h == "::1")
}

// portOf is a URL's port, the scheme's default when it names none.
func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// refuse answers 403 with why, the entry to add.
func refuse(w http.ResponseWriter, why string) {
	http.Error(w, "agentjail: "+why, http.StatusForbidden)
}

// connect serves a CONNECT that comes after other requests on a
// connection of the HTTP server's (sniff serves a first one).
func (b *Broker) connect(w http.ResponseWriter, r *http.Request) {
	rep := &hijackReply{w: w}
	defer rep.close()
	b.tunnelTo(r.Context(), r.Host, rep)
}

// tunnelTo serves CONNECT host:port: a tunnel to a checked address,
// answered through rep.
func (b *Broker) tunnelTo(ctx context.Context, target string, rep connectReply) {
	start := time.Now()
	host, ps, err := net.SplitHostPort(target)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		rep.fail(http.StatusBadRequest, "agentjail: CONNECT needs HOST:PORT, got "+strconv.Quote(target))
		return
	}
	c := record.Connection{Proto: "connect", Host: strings.Trim(host, "[]"), Port: port}
	v := b.decide(ctx, "https", host, port)
	c.Allowed, c.Rule = v.allowed, v.rule
	if !v.allowed {
		c.Status = http.StatusForbidden
		finish(&c, start, nil)
		b.note(c, v.why) // said before the jail can read the answer and print its own
		rep.fail(http.StatusForbidden, "agentjail: "+v.why)
		return
	}
	up, err := b.dial(ctx, v, host, port, &c)
	if err != nil {
		c.Status = http.StatusBadGateway
		rep.fail(http.StatusBadGateway, fmt.Sprintf("agentjail: cannot reach %s: %v", hostPort(c.Host, port), err))
		finish(&c, start, err)
		b.note(c, unreachable(c, err))
		return
	}
	defer up.Close()
	conn, pre, err := rep.establish()
	if err == nil {
		c.Status = http.StatusOK
		b.hold(up)
		b.tunnel(conn, pre, up, &c)
		b.track(up, false)
	}
	finish(&c, start, err)
	b.note(c, "")
}

// unreachable is what the operator is told of an allowed connection whose
// upstream could not be reached: a mistyped entry, a name the host cannot
// resolve, a wrong base URL are otherwise only in the record. Nothing for
// a request its client gave up on.
func unreachable(c record.Connection, err error) string {
	if errors.Is(err, context.Canceled) {
		return "" // the jail's client went away, or the run is ending
	}
	return fmt.Sprintf("%s is allowed (%s) but cannot be reached: %v; the jail was answered 502", hostPort(c.Host, c.Port), c.Rule, err)
}

// established is a CONNECT's answer when the tunnel is open.
const established = "HTTP/1.1 200 Connection established\r\n\r\n"

// connectReply answers a CONNECT: on a connection of the HTTP server's
// (hijackReply) or on one sniff serves itself (rawReply).
type connectReply interface {
	// fail answers code, with msg as the body.
	fail(code int, msg string)
	// establish answers 200 and returns the jail's TCP connection and
	// what was read from it already.
	establish() (net.Conn, []byte, error)
}

type hijackReply struct {
	w    http.ResponseWriter
	jail net.Conn // once hijacked
}

func (h *hijackReply) fail(code int, msg string) { http.Error(h.w, msg, code) }

func (h *hijackReply) establish() (net.Conn, []byte, error) {
	jail, rw, err := http.NewResponseController(h.w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.jail = jail
	if _, err := rw.WriteString(established); err != nil {
		return nil, nil, err
	}
	if err := rw.Flush(); err != nil {
		return nil, nil, err
	}
	conn, pre := raw(jail, rw.Reader)
	return conn, pre, nil
}

func (h *hijackReply) close() {
	if h.jail != nil {
		h.jail.Close()
	}
}

// connectFirst serves a connection whose first request is a CONNECT; cr
// caps what its headers may take.
func (b *Broker) connectFirst(pc *peeked, cr *cappedReader) {
	rep := rawReply{pc}
	req, err := http.ReadRequest(pc.r)
	if err != nil {
		if errors.Is(err, errHeaderTooLarge) {
			rep.fail(http.StatusRequestHeaderFieldsTooLarge, "agentjail: "+err.Error())
		} else if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
			rep.fail(http.StatusBadRequest, "agentjail: cannot read the request: "+err.Error())
		}
		return
	}
	cr.left = -1
	pc.SetReadDeadline(time.Time{})
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		rep.fail(http.StatusServiceUnavailable, "agentjail: the run is ending")
		return
	}
	b.tunnelTo(b.ctx, req.Host, rep)
}

// rawReply answers on a connection sniff serves: a failure closes it.
type rawReply struct{ pc *peeked }

func (r rawReply) fail(code int, msg string) { answer(r.pc, code, msg) }

func (r rawReply) establish() (net.Conn, []byte, error) {
	if _, err := io.WriteString(r.pc.Conn, established); err != nil {
		return nil, nil, err
	}
	conn, pre := raw(r.pc)
	return conn, pre, nil
}

// hold tracks an upstream connection, so that Close ends it.
func (b *Broker) hold(c net.Conn) {
	if !b.track(c, true) {
		c.Close()
	}
}

// dial reaches host:port as v says: through the operator's proxy, or at
// the first checked address that answers. It notes what it dialed in c.
func (b *Broker) dial(ctx context.Context, v verdict, host string, port int, c *record.Connection) (net.Conn, error) {
	if v.err != nil {
		return nil, v.err
	}
	ctx, cancel := context.WithTimeout(ctx, dialWait)
	defer cancel()
	if v.proxy != nil {
		c.Via = "upstream-proxy"
		return dialVia(ctx, v.proxy, hostPort(strings.Trim(host, "[]"), port))
	}
	var errs []error
	d := net.Dialer{}
	for _, a := range v.addrs {
		conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			c.Addr = a.String()
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// verdictKey carries a forwarded request's verdict to the transport's
// dial, so that it dials exactly the addresses checked.
type verdictKey struct{}

func verdictOf(ctx context.Context) verdict {
	v, _ := ctx.Value(verdictKey{}).(verdict)
	return v
}

// dialChecked is the forwarding transport's dial: to the checked
// addresses of the request's verdict (the operator's proxy, when the
// transport goes through one, is dialed as it is).
func (b *Broker) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	v := verdictOf(ctx)
	if v.proxy != nil {
		return (&net.Dialer{Timeout: dialWait}).DialContext(ctx, network, addr)
	}
	host, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	var c record.Connection
	return b.dial(ctx, v, host, port, &c)
}

// tally is what passed through a body: its bytes, and the first error a
// read of it met other than its end.
type tally struct {
	n   atomic.Int64
	err atomic.Pointer[error]
}

// counter counts what passes through a body in a tally.
type counter struct {
	io.ReadCloser
	t *tally
}

func (c counter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.t.n.Add(int64(n))
	if err != nil && err != io.EOF {
		c.t.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// cutOff says why a response was cut off after down's bytes: the first
// error reading it from upstream, else its copy to the jail failed.
func cutOff(down *tally) error {
	if err := down.err.Load(); err != nil {
		return fmt.Errorf("the response was cut off after %d bytes: reading it from upstream: %w", down.n.Load(), *err)
	}
	return fmt.Errorf("the response was cut off after %d bytes: the jail's side stopped taking it", down.n.Load())
}

// copyBuffers are the reverse proxy's copy buffers: large, so that a big
// body passes in few reads and writes (its own default is 32 KiB).
var copyBuffers = &bufferPool{size: 256 << 10}

type bufferPool struct {
	size int
	pool sync.Pool
}

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, p.size)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// relay is how proxied forwards a request.
type relay struct {
	rewrite   func(*httputil.ProxyRequest)
	transport http.RoundTripper
	// bulk: a big body may leave the reverse proxy for the tunnels' path
	// (bulkBody).
	bulk bool
	// redact: the credentials an API route adds, masked in its answers.
	redact *redactor
}

// proxied runs one request through a reverse proxy and records it.
func (b *Broker) proxied(w http.ResponseWriter, r *http.Request, c record.Connection, how relay) {
	start := time.Now()
	bulk, red := how.bulk, how.redact
	var up, down tally
	var failed error
	var why string    // the upstream could not be reached: said once
	var used net.Conn // the upstream connection the transport used
	if bulk {
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { used = i.Conn },
		}))
	}
	rp := &httputil.ReverseProxy{
		Transport: how.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
				pr.Out.Body = counter{pr.Out.Body, &up}
			}
			pr.Out.Header.Del("Proxy-Authorization")
			how.rewrite(pr)
			if red != nil {
				// gzip at most, taken off by readable: the body is read
				// plain.
				pr.Out.Header.Set("Accept-Encoding", "gzip")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			c.Status = resp.StatusCode
			if red != nil {
				if err := readable(resp); err != nil {
					return err
				}
				resp.Body = &redactedBody{ReadCloser: resp.Body, r: red}
			}
			resp.Body = counter{resp.Body, &down}
			if bulk && bulky(r, resp, used) {
				resp.Header.Set("Connection", "close")
				resp.Body = &bulkBody{ReadCloser: resp.Body, b: b, w: w, up: used, left: resp.ContentLength, down: &down, kernel: &c.KernelPath}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if red != nil && red.fold(err.Error()) != err.Error() {
				// The transport quotes a malformed answer's line, which
				// an echo makes a request's, and readable the answer's
				// coding, which it may be too.
				err = errors.New(red.fold(err.Error()))
			}
			failed, why = err, unreachable(c, err)
			c.Status = http.StatusBadGateway
			msg := fmt.Sprintf("agentjail: cannot reach %s: %v", hostPort(c.Host, c.Port), err)
			var u unreadable
			if errors.As(err, &u) {
				why = fmt.Sprintf("%s (%s): %v; the jail was answered 502", hostPort(c.Host, c.Port), c.Rule, err)
				msg = fmt.Sprintf("agentjail: %s: %v", hostPort(c.Host, c.Port), err)
			}
			http.Error(w, msg, http.StatusBadGateway)
		},
		ErrorLog:   discardLog,
		BufferPool: copyBuffers,
	}
	// Full duplex: the jail's request body is still read (by the
	// transport, for the upstream) while the response is written. Else the
	// HTTP/1 server, at the response's first write, closes a body whose
	// EOF the transport has not read yet, the transport then closes the
	// upstream connection, and the response in flight is cut off: a
	// streamed API answer broke so under load.
	// The error is only ErrNotSupported, from a server that cannot (HTTP/2
	// is full duplex already): nothing to do about it either way.
	_ = http.NewResponseController(w).EnableFullDuplex()
	// A body the transport never took (an upstream that could not be
	// reached) is closed before the handler returns: with full duplex on,
	// the server would drain it only after it has stopped its background
	// read, which then starts again and meets the next request's read: a
	// panic, and the connection closed (golang/go#68560). Only then: a
	// body still being read is the server's to end, after the answer.
	defer func() {
		if failed != nil {
			r.Body.Close()
		}
	}()
	// Recorded on every path: a copy that fails mid-body aborts the
	// handler (the reverse proxy panics with http.ErrAbortHandler).
	cut := true
	defer func() {
		if cut && failed == nil {
			failed = cutOff(&down)
		}
		c.BytesUp, c.BytesDown = up.n.Load(), down.n.Load()
		finish(&c, start, failed)
		b.note(c, why)
	}()
	if red == nil {
		rp.ServeHTTP(w, r)
	} else {
		rp.ServeHTTP(&redactedWriter{ResponseWriter: w, r: red}, r)
		red.header(w.Header()) // the trailers
	}
	cut = false
}

// forwardHTTP forwards a plain HTTP request for another host.
func (b *Broker) forwardHTTP(w http.ResponseWriter, r *http.Request) {
	c := record.Connection{Proto: "http", Host: r.URL.Hostname(), Port: portOf(r.URL)}
	if r.URL.Scheme != "http" {
		http.Error(w, "agentjail: the broker forwards http:// URLs; for https:// use CONNECT (HTTPS_PROXY)", http.StatusBadRequest)
		return
	}
	v := b.decide(r.Context(), "http", c.Host, c.Port)
	c.Allowed, c.Rule = v.allowed, v.rule
	if !v.allowed {
		c.Status = http.StatusForbidden
		finish(&c, time.Now(), nil)
		b.note(c, v.why) // said before the answer, as in tunnelTo
		refuse(w, v.why)
		return
	}
	if v.proxy != nil {
		c.Via = "upstream-proxy"
	} else if len(v.addrs) > 0 {
		c.Addr = v.addrs[0].String()
	}
	r = r.WithContext(context.WithValue(r.Context(), verdictKey{}, v))
	b.proxied(w, r, c, relay{rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL = pr.In.URL
		pr.Out.Host = pr.In.Host
	}, transport: b.forward, bulk: v.proxy == nil})
}

// apiMethods are what an API route forwards: what the agents' APIs use.
var apiMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// apiHeaders are the headers an API route forwards, by name and by
// prefix (lower case): what Claude Code and Codex send (measured with
// their stand-ins: TestClaudeJailed, TestCodexJailed), what any HTTP
// client does. Others are dropped: a gateway upstream may route by a
// header (Helicone-Target-Url, x-portkey-custom-host, X-Original-URL),
// which would take the credential the route adds to a host of the
// jail's choosing, and some servers take a method from one
// (X-HTTP-Method-Override: TRACE would echo the credential).
var (
	apiHeaders = []string{"accept", "accept-language", "cache-control", "content-type", "user-agent",
		"x-api-key", "authorization", "idempotency-key", "x-app", "originator", "version",
		"session-id", "session_id", "thread-id", "conversation-id", "conversation_id", "x-client-request-id"}
	apiHeaderPrefixes = []string{"anthropic-", "x-stainless-", "x-claude-code-", "openai-", "x-openai-", "x-codex-"}
)

// keepAPIHeaders drops from h what an API route does not forward.
func keepAPIHeaders(h http.Header) {
	for k := range h {
		l := strings.ToLower(k)
		if !slices.Contains(apiHeaders, l) && !slices.ContainsFunc(apiHeaderPrefixes, func(p string) bool { return strings.HasPrefix(l, p) }) {
			delete(h, k)
		}
	}
}

// route serves a request for the broker itself: an API route, or the ping.
func (b *Broker) route(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == PingPath {
		fmt.Fprintln(w, "agentjail broker")
		return
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	var rt *Route
	for i := range b.cfg.Routes {
		if b.cfg.Routes[i].Name == name {
			rt = &b.cfg.Routes[i]
		}
	}
	if rt == nil {
		var names []string
		for _, x := range b.cfg.Routes {
			names = append(names, "/"+x.Name+"/")
		}
		http.Error(w, fmt.Sprintf("agentjail: the broker serves the API routes %s here, not %s; for other hosts set HTTP_PROXY", strings.Join(names, ", "), r.URL.Path), http.StatusNotFound)
		return
	}
	if !slices.Contains(apiMethods, r.Method) {
		// A TRACE (TRACK, trace, ...) is answered with the request as
		// the upstream got it: with the operator's credential in it.
		http.Error(w, fmt.Sprintf("agentjail: the API route /%s/ takes the methods %s, not %s (TRACE would echo the credential it adds)", rt.Name, strings.Join(apiMethods, ", "), strconv.Quote(r.Method)), http.StatusMethodNotAllowed)
		return
	}
	if up := r.Header.Get("Upgrade"); up != "" {
		http.Error(w, fmt.Sprintf("agentjail: the API route /%s/ takes no protocol upgrade (Upgrade: %s): agentjail reads each answer for the credential it adds", rt.Name, strconv.Quote(up)), http.StatusBadRequest)
		return
	}
	if dotSegments(r.URL.EscapedPath()) {
		http.Error(w, fmt.Sprintf("agentjail: the API route /%s/ takes no . or .. in its path, got %s", rt.Name, strconv.Quote(r.URL.EscapedPath())), http.StatusBadRequest)
		return
	}
	if rt.Paths != nil && !slices.ContainsFunc(rt.Paths, func(p string) bool {
		method, p, _ := strings.Cut(p, " ")
		return r.Method == method && (rest == p || strings.HasPrefix(rest, p+"/"))
	}) {
		// The credential is good for more than the API (an OAuth login
		// for the account's settings, its cloud sessions, minting API
		// keys; an API key for the organisation's stored completions and
		// models): the route goes where the agents' inference does.
		http.Error(w, fmt.Sprintf("agentjail: the API route /%s/ serves %s, not %s %s: the credential it adds is for the agent's inference only; for more, run with --net host", rt.Name, strings.Join(rt.Paths, ", "), r.Method, strconv.Quote(rest)), http.StatusForbidden)
		return
	}
	up := rt.Upstream
	// Joined escaped, as the jail sent it: the decoded path, escaped
	// again by the URL's rules, could fail to parse (a lone "%25") and
	// leave the upstream's own path, with the credential.
	escRest := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), "/"+name), "/")
	outPath, outRaw, err := joinPath(up, escRest)
	if err != nil {
		http.Error(w, fmt.Sprintf("agentjail: the API route /%s/ cannot forward the path %s: %v", rt.Name, strconv.Quote(r.URL.EscapedPath()), err), http.StatusBadRequest)
		return
	}
	c := record.Connection{Proto: "api", Host: up.Hostname(), Port: portOf(up), Allowed: true, Rule: "api:" + rt.Name}
	if b.proxyFor(up.Scheme, up.Hostname(), portOf(up)) != nil {
		c.Via = "upstream-proxy"
	}
	b.proxied(w, r, c, relay{rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(up)
		pr.Out.URL.Path, pr.Out.URL.RawPath = outPath, outRaw
		pr.Out.URL.RawQuery = strings.Trim(up.RawQuery+"&"+pr.In.URL.RawQuery, "&") // the operator's (?api-version=), then the jail's
		pr.Out.Host = up.Host
		keepAPIHeaders(pr.Out.Header)
		swap(pr.Out.Header, rt.Secrets)
		for k, vv := range rt.Headers {
			pr.Out.Header[k] = slices.Clone(vv)
		}
	}, transport: b.api, redact: b.redactor(rt)})
}

// redactor is route rt's redactor, made at its first request (its
// fragments are some hundred map entries a credential).
func (b *Broker) redactor(rt *Route) *redactor {
	if red, ok := b.redactors.Load(rt.Name); ok {
		return red.(*redactor)
	}
	red, _ := b.redactors.LoadOrStore(rt.Name, newRedactor(rt.SecretValues()))
	return red.(*redactor)
}

// dotSegments says whether a request's escaped path holds a . or ..
// segment as any server on the way might read it: decoded again and again
// (%252e%252e is one to a server that decodes twice), a backslash taken
// for a slash, a ;parameter dropped (..;/ is .. to Tomcat). An API route
// reaches below its upstream's path, never beside it: such a segment would
// climb out of it with the operator's credential.
func dotSegments(escaped string) bool {
	p := escaped
	for range 4 {
		next, err := url.PathUnescape(p)
		if err != nil || next == p {
			break
		}
		p = next
	}
	for _, seg := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// joinPath is the upstream's path with rest (the request's escaped path
// after the route's name) appended, decoded and as escaped.
func joinPath(up *url.URL, rest string) (string, string, error) {
	raw := strings.TrimSuffix(up.EscapedPath(), "/") + "/" + rest
	p, err := url.PathUnescape(raw)
	if err != nil {
		return "", "", err
	}
	if p == raw {
		raw = "" // nothing escaped: the URL needs no RawPath
	}
	return p, raw, nil
}

// swap puts the operator's credentials in place of the jail's
// placeholders, and drops every credential that is not one.
func swap(h http.Header, secrets map[string]string) {
	if v := h.Get("X-Api-Key"); v != "" {
		h.Del("X-Api-Key")
		if real, ok := secrets[v]; ok {
			h.Set("X-Api-Key", real)
		}
	}
	if v := h.Get("Authorization"); v != "" {
		h.Del("Authorization")
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			if real, ok := secrets[tok]; ok {
				h.Set("Authorization", "Bearer "+real)
			}
		}
	}
}

// bulkMin is the smallest body that leaves the reverse proxy (bulkBody).
const bulkMin = 1 << 20

// bulky says whether resp, the answer to r on the upstream connection
// used, is a body for the tunnels' path: a GET's 200 or 206 of at least
// bulkMin bytes by Content-Length, as the upstream sent it (not one the
// transport decompresses), on a TCP connection of the broker's own
// (plain HTTP, dialed to a checked address: not TLS, not the operator's
// proxy). Not for a GET with a body (the transport would still be reading
// it from the jail's connection, which the takeover stops), nor for an
// answer without a Content-Type (the server would sniff one from the
// body, which it no longer writes) or an event stream (the reverse proxy
// flushes those on a timer, which would run on the taken connection).
func bulky(r *http.Request, resp *http.Response, used net.Conn) bool {
	_, isTCP := used.(*net.TCPConn)
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	return isTCP && r.Method == http.MethodGet && r.ProtoAtLeast(1, 1) &&
		r.ContentLength == 0 && len(r.TransferEncoding) == 0 &&
		(resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent) &&
		resp.ContentLength >= bulkMin && !resp.Uncompressed && len(resp.TransferEncoding) == 0 &&
		ct != "" && mt != "text/event-stream"
}

// bulkBody is a big body of a forwarded plain HTTP request, which leaves
// the reverse proxy: it goes from the upstream connection to the jail's as
// a tunnel's download does, spliced, and on the kernel path once that
// can be had, where the reverse proxy would copy it through a buffer of
// the broker's (about half the speed of a tunnel's download).
//
// Its first read, by the reverse proxy once the response's head is
// written, takes the jail's connection over (the head is sent first), and
// the response says Connection: close, so that the jail does not send it
// another request. One read of the transport's body then takes what the
// transport has read of it already, which is in its read buffer (4 KiB,
// the transport's default: less than the read, copyBuffers' 256 KiB);
// what follows is on the upstream connection alone, and left bytes of it
// go to the jail. The transport, whose body was not read to its end,
// closes the upstream connection after. Where the jail's connection
// cannot be taken over, the body is read as any other.
//
// Meanwhile the jail's connection is read, and what it sends dropped (a
// request sent after this one goes unanswered): closed with input unread,
// it would be reset, and the body cut short. Its end half-closes the
// upstream connection, as a tunnel's does; once the body is sent, the
// jail has lingerWait to close its side before the broker closes it.
type bulkBody struct {
	io.ReadCloser // the transport's body, counted in down
	b             *Broker
	w             http.ResponseWriter
	up            net.Conn
	left          int64 // the body's length
	down          *tally
	kernel        *bool // whether it took the kernel path
	state         bulkState
}

// bulkState is how far a bulkBody has gone.
type bulkState int

const (
	bulkNotBegun bulkState = iota
	bulkAsAny              // the jail's connection could not be taken: read as any body
	bulkSent               // sent on the taken connection
)

func (f *bulkBody) Read(p []byte) (int, error) {
	switch f.state {
	case bulkAsAny:
		return f.ReadCloser.Read(p)
	case bulkSent:
		return 0, io.EOF
	}
	jail, rw, err := http.NewResponseController(f.w).Hijack()
	if err != nil {
		f.state = bulkAsAny
		return f.ReadCloser.Read(p)
	}
	f.state = bulkSent
	conn, _ := raw(jail, rw.Reader)
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, conn)
		if cw, ok := f.up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		close(ended)
	}()
	defer func() {
		select {
		case <-ended:
		case <-time.After(lingerWait):
		}
		jail.Close()
		<-ended
	}()
	n, err := f.ReadCloser.Read(p[:min(int64(len(p)), f.left)])
	if n > 0 {
		if _, werr := conn.Write(p[:n]); werr != nil {
			return 0, werr
		}
	}
	if err != nil && err != io.EOF {
		return 0, err
	}
	src := &source{Conn: f.up, left: f.left - int64(n)}
	if !f.b.track(f.up, true) { // the broker is closing
		return 0, errors.New("the run is ending")
	}
	defer f.b.track(f.up, false)
	var m int64
	done := make(chan struct{}, 1)
	f.b.copyDown(conn, src, &m, f.kernel, done)
	f.down.n.Add(m)
	if src.left > 0 {
		err := fmt.Errorf("the body ended %d bytes short", src.left)
		if src.ended { // else: the jail's side stopped taking it (cutOff)
			err = fmt.Errorf("the upstream ended the body %d bytes short", src.left)
			f.down.err.CompareAndSwap(nil, &err)
		}
		return 0, err
	}
	return 0, io.EOF
}

// lingerWait is how long a taken connection waits for the jail to close
// its side once the body is sent (net/http's own wait before it closes).
const lingerWait = 500 * time.Millisecond

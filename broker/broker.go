package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
)

// Caps on what one jail may make the broker hold.
const (
	// DefaultMaxConns bounds the connections open at once; one more is
	// answered 503 at once, never left in the listen backlog.
	DefaultMaxConns = 512
	// fdReserve is the descriptors kept for agentjail's own work (the
	// record, the log, the results) whatever the jail does.
	fdReserve = 256
	// headerWait bounds a request's first line and headers, and the first
	// byte of a connection.
	headerWait = 10 * time.Second
	// maxHeader bounds a request's headers.
	maxHeader = 64 << 10
	// dialWait bounds a dial out.
	dialWait = 10 * time.Second
	// maxIdle bounds the connections to upstreams kept open for reuse
	// after their request, and idleWait how long one is: a jail closing
	// its side after each request to a new host:port (a wildcard entry)
	// left one each for 90 s, past the connection cap (19 000
	// descriptors and 500 MB in 30 s).
	maxIdle  = 16
	idleWait = 30 * time.Second
)

// Route is an API route: a request for http://BROKER/NAME/REST goes to
// Upstream joined with REST, with the operator's credential in place of
// the jail's placeholder.
type Route struct {
	Name     string
	Upstream *url.URL
	// Secrets maps each placeholder the jail holds to the value it stands
	// for. A credential header (X-Api-Key, Authorization: Bearer) holding
	// a placeholder gets its value; any other credential header is
	// dropped: the route never carries a credential of the agent's own.
	Secrets map[string]string
	// Headers are the operator's, added to every request in place of the
	// jail's of those names (ANTHROPIC_CUSTOM_HEADERS: a gateway's key).
	// Those that hold a credential are kept out of the answers as the
	// credentials are (SecretValues).
	Headers http.Header
	// Paths are where below its upstream the route goes: each a method
	// and a path ("POST v1/messages") that the request's, after the
	// route's name, is or lies below. Nil: anywhere.
	Paths []string
}

// SecretValues are what the route adds that the jail must not see: the
// credentials, and the values of its headers whose names say they hold
// one (a key, a token, authorization; a bearer's token alone too) of at
// least record.MinSecret bytes. Other headers (a provider's name, a flag)
// are no secret: masking "1" or "true" in every answer would break them.
func (r *Route) SecretValues() []string {
	var out []string
	for _, v := range r.Secrets {
		out = append(out, v)
	}
	for k, vv := range r.Headers {
		if !credentialHeader(k) {
			continue
		}
		for _, v := range vv {
			tok, _ := strings.CutPrefix(v, "Bearer ")
			for _, s := range []string{v, tok} {
				if len(s) >= record.MinSecret && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// credentialHeader says whether a header's name says it holds a
// credential: a word of it is one (X-Portkey-Api-Key: key), or ends in
// one (X-ApiToken), or it is a configuration that may hold one
// (X-Portkey-Config: {"api_key": …}). X-Portkey-Provider holds none.
func credentialHeader(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' })
	return slices.ContainsFunc(words, func(w string) bool {
		return slices.Contains([]string{"key", "auth", "authorization", "authentication", "cookie", "signature", "config"}, w) ||
			slices.ContainsFunc([]string{"apikey", "token", "secret", "password", "passphrase", "credential", "credentials", "jwt"},
				func(s string) bool { return strings.HasSuffix(w, s) })
	})
}

// Config is one broker.
type Config struct {
	// Rules are network.allow, parsed.
	Rules []policy.NetRule
	// Routes are the API routes.
	Routes []Route
	// Port is the broker's port in the jail: a request in absolute form
	// for 127.0.0.1, ::1 or localhost on it is for an API route.
	Port int
	// Proxy is the operator's proxy for a URL (httpproxy's ProxyFunc),
	// nil for none: egress and the API routes go out through it.
	Proxy func(*url.URL) (*url.URL, error)
	// Resolve looks a host name up; nil: the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// HostAddrs are the host's own addresses, refused as host-address.
	HostAddrs []netip.Addr
	// MaxConns bounds the connections open at once; 0: DefaultMaxConns,
	// at most (the soft RLIMIT_NOFILE - 256) / 2.
	MaxConns int
	// NoKernelPath keeps every tunnel relayed: no download half moves to
	// the kernel path (kernel_linux.go).
	NoKernelPath bool
	// Say, when set, is called once for each host:port refused, with the
	// explanation the 403 carries, and once for each allowed host:port
	// (or API route) that could not be reached, with why (agentjail says
	// it on stderr: an operator's mistyped entry or upstream is otherwise
	// only in the record). A refused jail is answered once it returns (or
	// after sayWait), so the line comes before the refused tool's own
	// error on a terminal they share; so is a refusal of the same
	// host:port while it is being said.
	Say func(hostPort, why string)
	// sayWait, when set, replaces sayWait (the tests' own).
	sayWait time.Duration
}

// Broker is agentjail's proxy for one jail: HTTP CONNECT, plain HTTP
// forwarding, SOCKS5, and the API routes, on listeners in the jail's
// network namespace, dialing out from agentjail's.
type Broker struct {
	cfg   Config
	srv   *http.Server
	conns *chanListener // connections sniffed as HTTP, for srv
	slots chan struct{}

	forward, api *http.Transport
	redactors    sync.Map // route name → *redactor (Broker.redactor)

	// ctx is cancelled by Close: the lookups and dials of connections
	// served outside the HTTP server end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	rec       *record.Network
	said      map[string]chan struct{} // host:port refused → closed once said
	failSaid  map[string]bool          // allowed host:port said unreachable
	active    map[net.Conn]bool
	listeners []net.Listener
	closed    bool
	wg        sync.WaitGroup // accept loops, sniffers, the HTTP server

	kernelOnce sync.Once
	kpath      *kernelPath
	handlers   sync.WaitGroup // HTTP handlers (a tunnel outlives its connection's server)
	saying     sync.WaitGroup // Refused calls
}

// New makes a broker; Serve hands it its listeners.
func New(cfg Config) *Broker {
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MaxConns = max(1, min(cfg.MaxConns, (softNofile()-fdReserve)/2))
	if cfg.sayWait <= 0 {
		cfg.sayWait = sayWait
	}
	b := &Broker{
		cfg:      cfg,
		conns:    &chanListener{c: make(chan net.Conn), done: make(chan struct{})},
		slots:    make(chan struct{}, cfg.MaxConns),
		rec:      record.NewNetwork(policy.NetProxy, nil),
		said:     map[string]chan struct{}{},
		failSaid: map[string]bool{},
		active:   map[net.Conn]bool{},
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// net/http's client logs through the standard logger, which nothing
	// else of agentjail's uses, what an upstream sends on an idle
	// connection ("Unsolicited response received..."): a line an allowed
	// host chose, on the operator's stderr, under --quiet too.
	log.SetOutput(io.Discard)
	b.forward = &http.Transport{
		Proxy:                 func(r *http.Request) (*url.URL, error) { return verdictOf(r.Context()).proxy, nil },
		DialContext:           b.dialChecked,
		MaxIdleConns:          maxIdle,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       idleWait,
		ResponseHeaderTimeout: 0, // a long poll is the agent's business
	}
	b.api = &http.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) {
			return b.proxyFor(r.URL.Scheme, r.URL.Hostname(), portOf(r.URL)), nil
		},
		DialContext:       (&net.Dialer{Timeout: dialWait}).DialContext,
		ForceAttemptHTTP2: true,
		// The API routes ask for gzip and take it off themselves
		// (readable): the transport's own takes off one coding, however
		// many the answer names.
		DisableCompression:  true,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     idleWait,
		TLSHandshakeTimeout: dialWait,
	}
	b.srv = &http.Server{
		Handler:           b,
		ReadHeaderTimeout: headerWait,
		MaxHeaderBytes:    maxHeader,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          discardLog,
	}
	b.wg.Go(func() { b.srv.Serve(b.conns) })
	return b
}

// Serve accepts the jail's connections on l until Close.
func (b *Broker) Serve(l net.Listener) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		l.Close()
		return
	}
	b.listeners = append(b.listeners, l)
	if b.rec.Broker == "" {
		b.rec.Broker = l.Addr().String()
	}
	b.wg.Go(func() { b.accept(l) })
}

func (b *Broker) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: the caps keep agentjail's own
			// descriptors; wait for one to be given back.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		select {
		case b.slots <- struct{}{}:
		default:
			b.overLimit(c)
			continue
		}
		if !b.track(c, true) {
			<-b.slots
			c.Close()
			continue
		}
		// This goroutine serves c, at once, and a new one takes the next
		// connection: no hand-off between the accept and the first read.
		b.wg.Go(func() { b.accept(l) })
		b.sniff(c)
		return
	}
}

// overLimit answers a connection past MaxConns with a 503 and closes it.
func (b *Broker) overLimit(c net.Conn) {
	b.mu.Lock()
	t := &b.rec.Totals
	t.Connections++
	t.Refused++
	t.OverLimit++
	if !slices.Contains(b.rec.LimitsHit, "max_connections") {
		b.rec.LimitsHit = append(b.rec.LimitsHit, "max_connections")
	}
	b.mu.Unlock()
	answer(c, http.StatusServiceUnavailable, fmt.Sprintf("agentjail: the jail has %d connections open through the broker, its most at once; close some and retry", b.cfg.MaxConns))
	c.Close()
}

// answer writes a plain-text HTTP answer that ends the connection, for a
// connection no HTTP server serves (one past the cap, a CONNECT served
// where it was sniffed); msg is the body's one line. A reader that takes
// nothing gets a second.
func answer(c net.Conn, code int, msg string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}

// sniff reads a connection's first bytes: SOCKS5 (5) and a first
// request that is a CONNECT (what every proxy client sends first) are
// served on this goroutine, anything else goes to the HTTP server. A
// CONNECT served here is a tunnel one hand-off sooner: no server
// goroutine between the jail's request and its dial.
func (b *Broker) sniff(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(headerWait))
	// The cap is the HTTP server's: the headers and a read's worth more.
	cr := &cappedReader{r: c, left: maxHeader + 4096}
	br := bufio.NewReader(cr)
	first, err := br.Peek(1)
	if err != nil {
		b.release(c)
		return
	}
	pc := &peeked{Conn: c, r: br, b: b}
	if first[0] == socksVersion {
		cr.left = -1
		c.SetReadDeadline(time.Time{})
		b.socks(pc)
		pc.Close()
		return
	}
	// Every request line is longer than "CONNECT " (a client sends it
	// whole before it waits for an answer); only one that starts with C
	// is waited for that long here.
	if first[0] == 'C' {
		if method, _ := br.Peek(len("CONNECT ")); string(method) == "CONNECT " {
			b.connectFirst(pc, cr)
			pc.Close()
			return
		}
	}
	cr.left = -1 // the HTTP server has its own cap
	c.SetReadDeadline(time.Time{})
	select {
	case b.conns.c <- pc:
	case <-b.conns.done:
		pc.Close()
	}
}

// track adds or removes an open connection of the jail's; it refuses to
// add one once the broker is closing.
func (b *Broker) track(c net.Conn, add bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if add && b.closed {
		return false
	}
	if add {
		b.active[c] = true
	} else {
		delete(b.active, c)
	}
	return true
}

// release closes a connection of the jail's and gives its slot back.
func (b *Broker) release(c net.Conn) {
	c.Close()
	b.track(c, false)
	<-b.slots
}

// peeked is a connection of the jail's whose first bytes sit in r; its
// Close gives the slot back, once.
type peeked struct {
	net.Conn
	r    *bufio.Reader
	b    *Broker
	once sync.Once
}

func (p *peeked) Read(buf []byte) (int, error) { return p.r.Read(buf) }

func (p *peeked) Close() error {
	p.once.Do(func() { p.b.release(p.Conn) })
	return nil
}

// cappedReader reads at most left bytes from r (a request's headers),
// any number once left is negative.
type cappedReader struct {
	r    io.Reader
	left int
}

var errHeaderTooLarge = errors.New("request headers too large")

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return c.r.Read(p)
	}
	if c.left == 0 {
		return 0, errHeaderTooLarge
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// chanListener hands the HTTP server the connections sniff passes it.
type chanListener struct {
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// Close stops the broker: its listeners, then every connection still
// open, and returns its report for the record. Call it once the jail has
// ended.
func (b *Broker) Close() *record.Network {
	b.mu.Lock()
	b.closed = true
	for _, l := range b.listeners {
		l.Close()
	}
	for c := range b.active {
		c.Close()
	}
	b.mu.Unlock()
	b.cancel()
	b.conns.Close()
	b.srv.Close()
	b.wg.Wait()
	b.handlers.Wait()
	// A refusal still being said (a stalled stderr) is given as long as
	// its answer was, so that its line does not come after the run's.
	said := make(chan struct{})
	go func() { b.saying.Wait(); close(said) }()
	b.awaitSaid(said)
	b.forward.CloseIdleConnections()
	b.api.CloseIdleConnections()
	if b.kpath != nil {
		b.kpath.close()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rec
}

// clipHost cuts a host the jail named to what a host name may be (253
// bytes) and a mark: a malformed one of 60 KB, refused, made a 72 MB record
// out of a thousand requests.
func clipHost(h string) string {
	if len(h) <= maxHostName {
		return h
	}
	return strings.ToValidUTF8(h[:maxHostName], "") + "…"
}

// maxHostName is the longest a DNS name may be written (RFC 1035).
const maxHostName = 253

// note records one connection or request, and says once a refused
// host:port (why: the refusal) or an allowed one that could not be
// reached (why: the failure).
func (b *Broker) note(c record.Connection, why string) {
	c.Host = clipHost(c.Host)
	b.mu.Lock()
	t := &b.rec.Totals
	t.Connections++
	t.BytesUp += c.BytesUp
	t.BytesDown += c.BytesDown
	if c.Allowed {
		t.Allowed++
	} else {
		t.Refused++
	}
	if len(b.rec.Connections) < record.MaxConnections {
		b.rec.Connections = append(b.rec.Connections, c)
	} else {
		b.rec.ConnectionsDropped++
	}
	hp := hostPort(c.Host, c.Port)
	var saying chan struct{} // closed once what hp's connection tells has been said
	first := false
	if !c.Allowed && why != "" {
		switch saying = b.said[hp]; {
		case saying != nil:
		case len(b.said) < record.MaxRefusedHosts:
			saying, first = make(chan struct{}), true
			b.said[hp] = saying
			b.rec.RefusedHosts = append(b.rec.RefusedHosts, hp)
		default:
			b.rec.RefusedHostsDropped++
			if !slices.Contains(b.rec.LimitsHit, "max_refused_hosts") {
				b.rec.LimitsHit = append(b.rec.LimitsHit, "max_refused_hosts")
				saying, first = make(chan struct{}), true
				why = fmt.Sprintf("%d hosts refused; the refusals of others are not said, only counted in the record (network.refused_hosts_dropped)", record.MaxRefusedHosts)
			}
		}
	}
	// An allowed one that failed: said once, not waited for (the jail
	// has its 502 already), and at most MaxRefusedHosts of them.
	if c.Allowed && why != "" && !b.failSaid[hp] && len(b.failSaid) < record.MaxRefusedHosts {
		b.failSaid[hp] = true
		saying, first = make(chan struct{}), true
	}
	b.mu.Unlock()
	if first {
		b.saying.Go(func() {
			if b.cfg.Say != nil {
				b.cfg.Say(hp, why)
			}
			close(saying)
		})
	}
	if saying != nil && !c.Allowed {
		b.awaitSaid(saying) // before the jail is answered
	}
}

// awaitSaid waits until said is closed, or sayWait at most: a stalled
// stderr (a paused terminal, a full pipe) holds nothing longer.
func (b *Broker) awaitSaid(said <-chan struct{}) {
	select {
	case <-said:
	case <-time.After(b.cfg.sayWait):
	}
}

// sayWait is how long a refusal's answer waits for the refusal to be said.
const sayWait = time.Second

// finish completes a connection's record: its duration, and err.
func finish(c *record.Connection, start time.Time, err error) {
	c.Start = record.Time(start)
	c.DurationMS = time.Since(start).Milliseconds()
	if err != nil && c.Error == "" {
		c.Error = err.Error()
	}
}

// copyCounted copies src to dst, adding to *n, and half-closes dst after:
// one direction of a tunnel.
func copyCounted(dst net.Conn, src *source, n *int64, done chan<- struct{}) {
	m, _ := src.copyTo(dst, -1)
	*n += m
	endWrite(dst, done)
}

// endWrite half-closes dst (closes it, where it cannot be) and says so on
// done: the end of one direction of a tunnel.
func endWrite(dst net.Conn, done chan<- struct{}) {
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
	done <- struct{}{}
}

// tunnel joins the jail's connection and the upstream one until both
// directions end; pre is what the jail sent that was read already.
func (b *Broker) tunnel(jail net.Conn, pre []byte, up net.Conn, c *record.Connection) {
	if len(pre) > 0 {
		n, err := up.Write(pre)
		c.BytesUp += int64(n)
		if err != nil {
			return
		}
	}
	var upN, downN int64
	done := make(chan struct{}, 2)
	go b.copyDown(jail, &source{Conn: up, left: -1}, &downN, &c.KernelPath, done)
	copyCounted(up, &source{Conn: jail, left: -1}, &upN, done) // on this goroutine: one start fewer
	<-done
	<-done
	c.BytesUp += upN
	c.BytesDown += downN
}

// Relayed, the download half copies a chunk between two looks for the
// kernel path, and looks at most drainTries times.
const (
	downChunk  = 256 << 10
	drainTries = 16
)

// copyDown is the download half of a tunnel: up to jail, half-closing
// jail after. It relays (spliced); once a chunk has gone through, it looks
// for the jail's own socket at the other end of jail, in the background
// (a short answer never pays for the search). Once that is found, and
// unless the jail's reads of it could behave otherwise on the kernel path
// (readsDiffer: a blocking socket, a low-water mark), it moves to the
// kernel path (kernel_linux.go) in two steps, and says so in *inKernel:
//   - the jail's socket is admitted to the map, and one more chunk is
//     relayed by TCP: a read that was waiting in TCP's own receive when
//     the socket changed hands returns with it, and every read after it
//     waits where the redirected bytes arrive;
//   - once the jail has read all the tunnel sent it by TCP (nothing in
//     flight, nothing unread: nothing can be overtaken), the broker's end
//     joins, and what the broker writes is redirected.
//
// Where the kernel path is off, or the socket is not found, or its reads
// could behave otherwise, or the jail does not keep up, it relays to the
// end (a socket admitted stays in the map meanwhile; nothing is
// redirected to it, and being non-blocking, its reads never wait in the
// map's receive).
func (b *Broker) copyDown(jail net.Conn, up *source, n *int64, inKernel *bool, done chan<- struct{}) {
	mine := sysFD(jail)
	var end tunnelEnd
	type answer struct {
		fd int
		h  *holder
	}
	var found chan answer // the search's answer
	peer := answer{fd: -1}
	answered, admitted := false, false
	for tries := 0; tries < drainTries; {
		m, err := up.copyTo(jail, downChunk)
		*n += m
		if err != nil || m < downChunk {
			break // the end, or an error: the copy below ends at once
		}
		if found == nil {
			if b.kernel() == nil || mine < 0 || sysFD(up.Conn) < 0 {
				break
			}
			var err error
			if end, err = endOf(mine); err != nil {
				break
			}
			found = make(chan answer, 1)
			go func() {
				fd, h, err := peerSocket(end)
				if err != nil {
					fd = -1
				}
				found <- answer{fd, h}
			}()
			continue
		}
		if !answered {
			select {
			case peer = <-found:
				answered = true
			default:
				continue
			}
		}
		if peer.fd < 0 || readsDiffer(peer.fd) {
			break
		}
		if !admitted {
			if b.kpath.admit(end, peer.fd) != nil {
				break
			}
			admitted = true
			continue // the chunk that ends a wait in TCP's receive
		}
		tries++
		if !drained(mine, peer.fd) {
			continue
		}
		if readsDiffer(peer.fd) { // made blocking meanwhile
			break
		}
		if b.kpath.redirect(mine) == nil {
			*inKernel = true
		}
		break
	}
	switch {
	case peer.fd >= 0:
		unix.Close(peer.fd) // the map holds the socket; the jail's close ends it
		defer peer.h.close()
	case found != nil && !answered:
		go func() { // the search still runs
			if a := <-found; a.fd >= 0 {
				unix.Close(a.fd)
				a.h.close()
			}
		}()
	}
	if *inKernel {
		// Never relayed after: the broker's writes would still be
		// redirected, with no look at what the jail has not read. An
		// error cuts the stream.
		if !b.kernelDown(jail, up, peer.h, b.kpath.q, n) {
			jail.Close()
		}
		endWrite(jail, done)
		return
	}
	copyCounted(jail, up, n, done)
}

// kernelDown copies up to jail on the kernel path, a chunk of q at a
// time, each once the jail's socket holds at most q's limit less a chunk
// unread. It returns true at the end of up, and false on an error, when
// the jail's socket is no longer held by the jail (its bytes could never
// be read), or when the broker closes.
func (b *Broker) kernelDown(jail net.Conn, up *source, h *holder, q kernelQueue, n *int64) bool {
	for {
		for wait := 50 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
			unread, err := h.queued()
			if err != nil || b.ctx.Err() != nil {
				return false
			}
			if unread <= q.limit-q.chunk {
				break
			}
			time.Sleep(wait)
		}
		m, err := up.copyTo(jail, int64(q.chunk))
		*n += m
		if err != nil {
			return false
		}
		if m < int64(q.chunk) {
			return true
		}
	}
}

// drainWait is how long drained waits for the jail to read a chunk: a
// reader that is scheduled late on a busy host still takes the path, and
// one that has stopped reading costs drainTries of it once.
const drainWait = 50 * time.Millisecond

// drained waits up to drainWait for everything the tunnel sent by TCP to
// have been read by the jail: mine (the broker's end) has nothing
// unacknowledged, and peer (the jail's, in the map) nothing in its
// receive memory. Not SIOCINQ: on a socket in the map it counted only
// what was redirected, not the TCP bytes still unread (seen on Linux
// 6.18).
func drained(mine, peer int) bool {
	deadline := time.Now().Add(drainWait)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		out, err1 := unix.IoctlGetInt(mine, unix.TIOCOUTQ)
		mem, err2 := rmemAlloc(peer)
		if err1 != nil || err2 != nil {
			return false
		}
		if out == 0 && mem == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// source is what one direction of a tunnel reads: a connection to its
// end, or only left bytes of it (left >= 0: a response's body, on a
// connection that stays open after it).
type source struct {
	net.Conn
	left  int64
	ended bool // a limited source ended before its left bytes
}

// copyTo copies at most size bytes of s (size < 0: all of it) to dst.
// Between two TCP connections it splices: io.Copy does, from the
// connection itself or one LimitReader on it.
func (s *source) copyTo(dst net.Conn, size int64) (int64, error) {
	if s.left >= 0 && (size < 0 || size > s.left) {
		size = s.left
	}
	var m int64
	var err error
	if size < 0 {
		m, err = io.Copy(dst, s.Conn)
	} else {
		m, err = io.Copy(dst, io.LimitReader(s.Conn, size))
	}
	if s.left >= 0 {
		s.left -= m
		s.ended = s.ended || err == nil && m < size
	}
	return m, err
}

// sysFD is c's descriptor if it is a TCP connection, else -1. The
// descriptor stays c's: it is used while c is.
func sysFD(c net.Conn) int {
	t, ok := c.(*net.TCPConn)
	if !ok {
		return -1
	}
	rc, err := t.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// kernel is the broker's kernel path, made when a tunnel first asks; nil
// when it is off or this host will not have it (the record's
// network.kernel_path says which).
func (b *Broker) kernel() *kernelPath {
	b.kernelOnce.Do(func() {
		if b.cfg.NoKernelPath {
			b.setKernelPath("off")
			return
		}
		if why := refusedHere("/proc"); why != "" {
			b.setKernelPath("unavailable: " + why)
			return
		}
		k, err := newKernelPath()
		if err != nil {
			b.setKernelPath("unavailable: " + err.Error())
			return
		}
		b.kpath = k
		b.setKernelPath("on")
	})
	return b.kpath
}

func (b *Broker) setKernelPath(s string) {
	b.mu.Lock()
	b.rec.KernelPath = s
	b.mu.Unlock()
}

// raw returns the jail's TCP connection under c and the bytes already
// read from it (by bufs, then by the sniffer), so that a tunnel splices.
func raw(c net.Conn, bufs ...*bufio.Reader) (net.Conn, []byte) {
	var pre []byte
	for _, r := range bufs {
		if r != nil && r.Buffered() > 0 {
			p, _ := r.Peek(r.Buffered())
			pre = append(pre, p...)
		}
	}
	if p, ok := c.(*peeked); ok {
		if n := p.r.Buffered(); n > 0 {
			b, _ := p.r.Peek(n)
			pre = append(pre, b...)
		}
		return p.Conn, pre
	}
	return c, pre
}

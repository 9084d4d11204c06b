package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sys/unix"
)

// discardLog silences net/http's own logging: what matters is recorded.
var discardLog = log.New(discardWriter{}, "", 0)

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// softNofile is agentjail's soft RLIMIT_NOFILE (Go raises it to the hard
// limit at start).
func softNofile() int {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil || l.Cur > 1<<20 {
		return 1 << 20
	}
	return int(l.Cur)
}

// dialVia opens a tunnel to target (host:port) through the operator's
// proxy p (http:// or https://, user:password@ for Basic auth): the proxy
// resolves the name.
func dialVia(ctx context.Context, p *url.URL, target string) (net.Conn, error) {
	addr := p.Host
	if p.Port() == "" {
		port := "80"
		if p.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(p.Hostname(), port)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the upstream proxy %s: %w", p.Redacted(), err)
	}
	if p.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: p.Hostname()})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("the upstream proxy %s: %w", p.Redacted(), err)
		}
		conn = tc
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if u := p.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	br := bufio.NewReader(conn)
	err = req.Write(conn)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("it answered %s", resp.Status)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("the upstream proxy %s, CONNECT %s: %w", p.Redacted(), target, err)
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufConn is a connection whose first bytes were read into r already.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

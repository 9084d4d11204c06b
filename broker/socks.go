package broker

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/agentjail/agentjail/record"
)

// SOCKS5 (RFC 1928), CONNECT only, without authentication: what a client
// given ALL_PROXY=socks5h://… sends. The name is resolved here (ATYP 3),
// judged like a CONNECT's.
const (
	socksVersion = 5
	socksConnect = 1

	socksOK          = 0
	socksNotAllowed  = 2
	socksUnreachable = 4
	socksRefused     = 5
	socksBadCommand  = 7
	socksBadAddress  = 8
)

// socks serves one SOCKS5 connection.
func (b *Broker) socks(pc *peeked) {
	pc.SetReadDeadline(time.Now().Add(headerWait))
	var hdr [2]byte
	if _, err := io.ReadFull(pc, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(pc, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		pc.Write([]byte{socksVersion, 0xff})
		return
	}
	pc.Write([]byte{socksVersion, 0})
	var req [4]byte
	if _, err := io.ReadFull(pc, req[:]); err != nil || req[0] != socksVersion {
		return
	}
	reply := func(code byte) { pc.Write([]byte{socksVersion, code, 0, 1, 0, 0, 0, 0, 0, 0}) }
	var host string
	switch req[3] {
	case 1, 4:
		a := make([]byte, 4*int(req[3]))
		if _, err := io.ReadFull(pc, a); err != nil {
			return
		}
		ip, _ := netip.AddrFromSlice(a)
		host = ip.String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(pc, n[:]); err != nil {
			return
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(pc, name); err != nil {
			return
		}
		host = string(name)
	default:
		reply(socksBadAddress)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(pc, pb[:]); err != nil {
		return
	}
	pc.SetReadDeadline(time.Time{})
	port := int(binary.BigEndian.Uint16(pb[:]))
	if req[1] != socksConnect {
		reply(socksBadCommand)
		return
	}
	start := time.Now()
	c := record.Connection{Proto: "socks5", Host: host, Port: port}
	ctx, cancel := context.WithTimeout(b.ctx, dialWait) // the lookup's bound
	v := b.decide(ctx, "https", host, port)
	cancel()
	c.Allowed, c.Rule = v.allowed, v.rule
	if !v.allowed {
		finish(&c, start, nil)
		b.note(c, v.why) // said before the answer, as in tunnelTo
		reply(socksNotAllowed)
		return
	}
	up, err := b.dial(b.ctx, v, host, port, &c)
	if err != nil {
		code := byte(socksUnreachable)
		if opErr, ok := err.(*net.OpError); ok && opErr.Op == "dial" {
			code = socksRefused
		}
		reply(code)
		finish(&c, start, err)
		b.note(c, unreachable(c, err))
		return
	}
	defer up.Close()
	reply(socksOK)
	c.Status = http.StatusOK
	conn, pre := raw(pc)
	b.hold(up)
	b.tunnel(conn, pre, up, &c)
	b.track(up, false)
	finish(&c, start, nil)
	b.note(c, "")
}

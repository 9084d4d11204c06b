package broker

import (
	"bufio"
	"fmt"
	"net"
	"testing"
)

// BenchmarkFirstByte: a new connection's first byte of a response, from a
// server on the loopback, directly and through the broker (CONNECT, then
// the request in the tunnel): what the broker adds to a connection's
// start, without a jail or curl around it.
func BenchmarkFirstByte(b *testing.B) {
	w := newWorld(b, nil)
	target := "127.0.0.1:" + port(w.plain)
	get := "GET / HTTP/1.1\r\nHost: " + target + "\r\nConnection: close\r\n\r\n"
	firstByte := func(c net.Conn, br *bufio.Reader) {
		if _, err := c.Write([]byte(get)); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadByte(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			c, err := net.Dial("tcp", target)
			if err != nil {
				b.Fatal(err)
			}
			firstByte(c, bufio.NewReader(c))
			c.Close()
		}
	})
	b.Run("broker", func(b *testing.B) {
		for range b.N {
			c, err := net.Dial("tcp", w.addr)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				if line == "\r\n" {
					break
				}
			}
			firstByte(c, br)
			c.Close()
		}
	})
}

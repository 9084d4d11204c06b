package broker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/policy"
)

// bulkSize is the body the bulk tests fetch (GET /data): past bulkMin,
// and not a round number; GET /big is bigSize.
const (
	bulkSize = 3<<20 + 12345
	bigSize  = 40<<20 + 12345
)

// bulkData is a body of size bytes that say where they are.
func bulkData(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// bulkUpstream answers every request with bulkData, of bulkSize or
// bigSize bytes, as how says: "whole"
// (head and body in one write), "pieces" (the head with 100 bytes of the
// body, then the rest in small writes), "short" (2 MiB, then the end),
// "events" (whole, as text/event-stream). It returns its port.
func bulkUpstream(t *testing.T, how string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	data, big := bulkData(bulkSize), bulkData(bigSize)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					data := data
					if req.URL.Path == "/big" {
						data = big
					}
					ct := "application/octet-stream"
					if how == "events" {
						ct = "text/event-stream"
					}
					head := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", ct, len(data)))
					switch how {
					case "whole", "events":
						c.Write(append(head, data...))
					case "pieces":
						c.Write(append(head, data[:100]...))
						for off := 100; off < len(data); off += 70001 {
							time.Sleep(time.Millisecond)
							c.Write(data[off:min(len(data), off+70001)])
						}
					case "short":
						c.Write(append(head, data[:2<<20]...))
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestBrokerBulkBody: a big plain HTTP body leaves the reverse proxy
// (bulkBody): it arrives whole and in order whether the upstream sent it
// with its head or in pieces, with Connection: close; a request the jail
// sent after it (pipelined) goes unanswered without cutting it; the
// record counts its bytes. A GET with a body and an event stream stay
// with the reverse proxy (the takeover cut the first at 4 KiB, and the
// second's flush timer crashed the broker on the taken connection). An
// upstream that ends short is said in the record.
func TestBrokerBulkBody(t *testing.T) {
	for _, c := range []struct {
		how       string
		reqBody   string
		pipelined bool
		taken     bool
	}{
		{how: "whole", taken: true},
		{how: "pieces", taken: true},
		{how: "whole", pipelined: true, taken: true},
		{how: "whole", reqBody: strings.Repeat("q", 8<<10)},
		{how: "events"},
		{how: "short", taken: true},
	} {
		name := fmt.Sprintf("%s body=%d pipelined=%v", c.how, len(c.reqBody), c.pipelined)
		port := bulkUpstream(t, c.how)
		w := newWorld(t, func(cfg *Config) {
			r, err := policy.ParseNetRule("127.0.0.1:" + strconv.Itoa(port))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Rules = append(cfg.Rules, r)
		})
		conn, err := net.Dial("tcp", w.addr)
		if err != nil {
			t.Fatal(err)
		}
		data := bulkData(bulkSize)
		req := fmt.Sprintf("GET http://127.0.0.1:%d/data HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n", port, port)
		if c.reqBody != "" {
			req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(c.reqBody), c.reqBody)
		} else {
			req += "\r\n"
		}
		io.WriteString(conn, req)
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.pipelined {
			// Sent once the head is in, and the body read only after the
			// broker has sent it all and closed: left unread, the second
			// request made that close a reset, and the jail read 128 KiB of
			// the body.
			io.WriteString(conn, req)
			time.Sleep(500 * time.Millisecond)
		}
		got, err := io.ReadAll(resp.Body)
		if c.how == "short" {
			if err == nil || len(got) != 2<<20 {
				t.Errorf("%s: the jail read %d bytes, %v; want 2 MiB and an unexpected end", name, len(got), err)
			}
		} else if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: the jail read %d bytes (%v), equal %v; want the %d bytes sent", name, len(got), err, bytes.Equal(got, data), len(data))
		}
		if resp.Close != c.taken {
			t.Errorf("%s: Connection: close %v, want %v (the body taken over)", name, resp.Close, c.taken)
		}
		if c.taken {
			if rest, err := io.ReadAll(br); len(rest) != 0 || err != nil {
				t.Errorf("%s: after the body the jail read %q, %v; want the end", name, rest, err)
			}
		}
		conn.Close()
		rec := w.b.Close()
		if len(rec.Connections) < 1 {
			t.Fatalf("%s: nothing recorded", name)
		}
		r := rec.Connections[0]
		switch {
		case c.how == "short":
			if r.BytesDown != 2<<20 || !strings.Contains(r.Error, "upstream ended the body") {
				t.Errorf("%s: recorded %+v, want 2 MiB down and the upstream's short end", name, r)
			}
		case r.BytesDown != int64(len(data)) || r.Error != "":
			t.Errorf("%s: recorded %+v, want %d bytes down and no error", name, r, len(data))
		}
	}
}

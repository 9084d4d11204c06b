package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// headStart is how long the test servers pause after a stream's first
// MiB: the broker's search for the jail's socket, which starts after the
// first 256 KiB, then ends before the stream does even on a busy host (a
// 64 MiB download at full speed is over in a tenth of a second), so that
// the stream takes the kernel path whatever the host's load.
const headStart = 300 * time.Millisecond

// withHeadStart writes data to w: its first MiB, a pause of headStart,
// then the rest.
func withHeadStart(w io.Writer, data []byte) error {
	head := min(len(data), 1<<20)
	if _, err := w.Write(data[:head]); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	time.Sleep(headStart)
	_, err := w.Write(data[head:])
	return err
}

// dataServer serves, on the host's loopback, GET /data (size bytes of
// seeded random data, whose sha256 it returns) and GET /endless (zeros,
// more than any test reads), each with a head start.
func dataServer(t *testing.T, size int) (port int, sum string) {
	t.Helper()
	data := seeded(size)
	h := sha256.Sum256(data)
	zeros := make([]byte, 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/data" {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			withHeadStart(w, data)
			return
		}
		if withHeadStart(w, zeros) != nil {
			return
		}
		for range 1023 {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, hex.EncodeToString(h[:])
}

// seeded is size bytes of random data, the same each time.
func seeded(size int) []byte {
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{7}).Read(data)
	return data
}

// rawServer serves data, on the host's loopback, to whoever connects, and
// closes: a stream with no protocol around it, with a head start.
func rawServer(t *testing.T, data []byte) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				withHeadStart(c, data)
				c.Close()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestNetworkKernelPath: a CONNECT tunnel's download moves to the kernel
// path (the broker writes into the jail socket's receive queue,
// docs/network.md) and every byte arrives, in order: for a reader as fast
// as it can be, for one slower than the upstream, and for one that polls
// a non-blocking socket and reads it with recvfrom(2). Readers of a
// blocking socket, with and without MSG_WAITALL, get every byte and stay
// relayed: on the kernel path a read begun before the socket joined the
// map waited for ever in TCP's receive, and a later one could get EAGAIN.
// A reader that stops reading is not sent more than the broker's
// queue limit past what it read (the kernel's redirect has no flow
// control of its own: the whole stream would be pushed into the jail
// socket's queue, in the host's memory). With AGENTJAIL_KERNEL_PATH=off the tunnel is relayed,
// and says so.
func TestNetworkKernelPath(t *testing.T) {
	jailed(t)
	const size = 64 << 20
	port, sum := dataServer(t, size)
	rawPort := rawServer(t, seeded(size))
	reader := filepath.Join(visibleDir(t), "reader")
	if err := buildTool(reader, "reader"); err != "" {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	script := fmt.Sprintf(`
get() { curl -sS --noproxy '' -p "$@"; }
echo "fast=$(get %[1]s/data | sha256sum | cut -d' ' -f1)"
echo "slow=$(get --limit-rate 40M %[1]s/data | sha256sum | cut -d' ' -f1)"
get %[1]s/endless 2>/dev/null | { dd bs=1M count=8 iflag=fullblock of=/dev/null 2>/dev/null; sleep 2; }
echo stalled=done
# Readers of a raw stream with recvfrom(2): on a blocking socket (curl
# polls), the same with MSG_WAITALL, and polling a non-blocking one.
%[3]s blocking 127.0.0.1:%[2]d block
%[3]s waitall 127.0.0.1:%[2]d waitall
%[3]s polling 127.0.0.1:%[2]d poll
# Plain HTTP (HTTP_PROXY, no CONNECT): the body leaves the reverse proxy;
# the same curl then asks again, on a new connection (the first said close).
curl -sS --noproxy '' -o plain.out -o plain2.out %[1]s/data %[1]s/data
echo "plain=$(sha256sum < plain.out | cut -d' ' -f1)"
echo "plain2=$(sha256sum < plain2.out | cut -d' ' -f1)"
`, url, rawPort, reader)
	allow := "127.0.0.1:" + strconv.Itoa(port)
	for _, off := range []bool{false, true} {
		ws, rec := workspace(t), recordPath(t)
		inv := invocation{dir: ws}
		if off {
			inv.env = []string{"AGENTJAIL_KERNEL_PATH=off"}
		}
		r := inv.run(t, "run", "--write", ws, "--record", rec, "--allow-net", allow, "--allow-net", "127.0.0.1:"+strconv.Itoa(rawPort),
			"--idle-timeout", "20s", "--", "/bin/sh", "-c", script)
		wantCode(t, r, 0)
		got := lines(r.stdout)
		if got["fast"] != sum || got["slow"] != sum || got["stalled"] != "done" || got["blocking"] != sum || got["waitall"] != sum || got["polling"] != sum || got["plain"] != sum || got["plain2"] != sum {
			t.Fatalf("off=%v: the jail read %q, want sha256 %s of the seven downloads\nstderr:\n%s", off, r.stdout, sum, r.stderr)
		}
		n := readRecord(t, rec, 0).Network
		if n == nil {
			t.Fatal("no network in the record")
		}
		conns := append(n.conns("127.0.0.1", port), n.conns("127.0.0.1", rawPort)...)
		if len(conns) != 8 {
			t.Fatalf("off=%v: %d connections recorded, want 8: %+v", off, len(conns), conns)
		}
		// The tunnels (fast, slow, stalled; blocking, waitall, polling) and
		// the two plain HTTP requests, which may end in any order.
		var tunnels, plain []netConn
		for _, c := range conns {
			if c.Proto == "http" {
				plain = append(plain, c)
			} else {
				tunnels = append(tunnels, c)
			}
		}
		conns = tunnels
		if len(plain) != 2 {
			t.Fatalf("off=%v: %d plain HTTP requests recorded, want 2: %+v", off, len(plain), plain)
		}
		for _, c := range plain {
			if c.Proto != "http" || c.BytesDown != size || c.KernelPath == off {
				t.Errorf("off=%v: a plain HTTP download of %d bytes: %+v, want every byte counted, on the kernel path unless it is off", off, size, c)
			}
		}
		if off {
			if n.KernelPath != "off" {
				t.Errorf("record.network.kernel_path = %q, want off", n.KernelPath)
			}
			for _, c := range conns {
				if c.KernelPath {
					t.Errorf("a tunnel took the kernel path with it off: %+v", c)
				}
			}
			continue
		}
		if n.KernelPath != "on" {
			t.Fatalf("record.network.kernel_path = %q, want on", n.KernelPath)
		}
		for _, c := range []netConn{conns[0], conns[1], conns[5]} {
			if !c.KernelPath || c.BytesDown < size || c.BytesDown > size+1024 {
				t.Errorf("a download of %d bytes: %+v, want it on the kernel path with every byte counted", size, c)
			}
		}
		// A blocking socket stays relayed: the kernel's receive on a socket
		// in the map can return EAGAIN to a blocking read.
		for _, c := range conns[3:5] {
			if c.KernelPath || c.BytesDown != size {
				t.Errorf("a download of %d bytes read from a blocking socket: %+v, want it relayed with every byte counted", size, c)
			}
		}
		// 8 MiB read, and at most the broker's queue limit more (32 MiB at
		// most, what TCP's buffers could hold: broker/kernel_linux.go); the
		// jail had read all the relay sent before the path. Without the
		// broker's flow control the whole endless stream (1 GiB) goes into
		// the queue in those 2 s.
		c := conns[2]
		t.Logf("a reader that stopped after 8 MiB was sent %d KiB", c.BytesDown>>10)
		if !c.KernelPath || c.BytesDown > 48<<20 {
			t.Errorf("a reader that stopped after 8 MiB was sent %d MiB (kernel path %v), want at most 48", c.BytesDown>>20, c.KernelPath)
		}
	}
}

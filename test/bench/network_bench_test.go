package bench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/launch"
)

// gib1 is what the broker benchmark downloads.
const gib1 = 1 << 30

// loopbackServer serves GET /big (1 GiB of zeros, 1 MiB writes) and GET /
// (one byte) on the host's loopback; it returns the port.
func loopbackServer(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			w.Write([]byte("x"))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(gib1))
		for range gib1 / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// freePort is a port on the loopback nothing listens on now.
func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// floor starts a relay or proxy that is not agentjail's (socat, tinyproxy)
// on the host's loopback for the rest of the benchmark, once it listens on
// port.
func floor(b *testing.B, port int, name string, args ...string) {
	path, err := exec.LookPath(name)
	if err != nil {
		b.Fatalf("%s (make deps-bench installs it): %v", name, err)
	}
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 100 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s does not listen on %d", name, port)
}

// BenchmarkBrokerDownload: 1 GiB from a server on the host's loopback,
// fetched by curl in a tier1 jail through the broker (a CONNECT tunnel,
// whose download takes the kernel path, and a plain HTTP request, whose
// big body leaves the broker's reverse proxy for the same path),
// against the same download in a jail on the host's network (--net host).
// The launch is included on both sides. Target: ≥ 0.8× the direct MB/s.
// Beside it, the floor of any relay: socat with 1 MiB buffers between
// curl in a --net host jail and the server (no code of agentjail's on the
// path but the launch). And the CONNECT tunnel with the kernel path on
// against the same tunnel relayed (AGENTJAIL_KERNEL_PATH=off).
func BenchmarkBrokerDownload(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	port := loopbackServer(b)
	url := fmt.Sprintf("http://127.0.0.1:%d/big", port)
	allow := fmt.Sprintf("127.0.0.1:%d", port)
	relay := freePort(b)
	floor(b, relay, "socat", "-b", "1048576", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork", relay), fmt.Sprintf("TCP:127.0.0.1:%d", port))
	direct := func() error {
		return devNull(agentjail, "run", "--net", "host", "--", "curl", "-sSf", "-o", "/dev/null", url)
	}
	// The host's speed drifts over a run: nine samples a side, and each
	// share also as the median of the shares within pairs.
	n := samples(9)
	none := func() {}
	for range b.N {
		c := measure(b, "download 1 GiB, CONNECT", n, "--net host, direct", direct,
			"through the broker (CONNECT)", func() error {
				return devNull(agentjail, "run", "--allow-net", allow, "--", "curl", "-sSf", "--noproxy", "", "-p", "-o", "/dev/null", url)
			}, none)
		b.ReportMetric(reportGiB(c, "broker (CONNECT)"), "x-connect")
		c = measure(b, "download 1 GiB, CONNECT", n, "kernel path off (relayed)", func() error {
			return devNullEnv([]string{"AGENTJAIL_KERNEL_PATH=off"}, agentjail, "run", "--allow-net", allow, "--", "curl", "-sSf", "--noproxy", "", "-p", "-o", "/dev/null", url)
		}, "kernel path on", func() error {
			return devNull(agentjail, "run", "--allow-net", allow, "--", "curl", "-sSf", "--noproxy", "", "-p", "-o", "/dev/null", url)
		}, none)
		fmt.Printf("%-28s the kernel path's own gain: %.3f× the relayed MB/s (paired %.3f×)\n", "", float64(median(c.ref))/float64(median(c.subj)), 1/c.paired())
		b.ReportMetric(float64(median(c.ref))/float64(median(c.subj)), "x-kernel-path")
		c = measure(b, "download 1 GiB, plain HTTP", n, "--net host, direct", direct,
			"through the broker (plain HTTP)", func() error {
				return devNull(agentjail, "run", "--allow-net", allow, "--", "curl", "-sSf", "--noproxy", "", "-o", "/dev/null", url)
			}, none)
		b.ReportMetric(reportGiB(c, "broker (plain HTTP)"), "x-plain")
		c = measure(b, "download 1 GiB, a relay", n, "--net host, direct", direct,
			"through socat -b 1048576", func() error {
				return devNull(agentjail, "run", "--net", "host", "--", "curl", "-sSf", "--connect-to", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", port, relay), "-o", "/dev/null", url)
			}, none)
		b.ReportMetric(reportGiB(c, "socat (the floor of a relay)"), "x-socat")
	}
}

// reportGiB prints a 1 GiB download's MB/s by each side's median and the
// subject's share of the reference's, by the medians and within pairs;
// it returns the share by the medians.
func reportGiB(c comparison, how string) float64 {
	mb := func(d time.Duration) float64 { return float64(gib1) / 1e6 / d.Seconds() }
	ref, subj := median(c.ref), median(c.subj)
	share := mb(subj) / mb(ref)
	fmt.Printf("%-28s direct %.0f MB/s, %s %.0f MB/s: %.3f× (paired %.3f×; target ≥ 0.8×)\n", "", mb(ref), how, mb(subj), share, 1/c.paired())
	return share
}

// BenchmarkBrokerFirstByte: connect and first byte of 200 requests in one
// jail, each a new curl: through the broker (a CONNECT tunnel) against
// direct in a jail on the host's network; curl's own time_starttransfer,
// so that process start-up is left out. Target: adds < 1 ms. Beside it,
// the floor of a CONNECT proxy here: tinyproxy (C), in a --net host jail.
// Each also by curl's phases (the connection made, the CONNECT answered,
// the first byte), which say where a proxy's time goes; and all of it
// again with a minimal client (testdata/firstbyte) in curl's place, which
// leaves out curl's own work for a proxy (parsing the proxy's answer,
// its proxy state machine), part of what curl measures through any proxy.
func BenchmarkBrokerFirstByte(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: agentjail run drops to the run user")
	}
	port := loopbackServer(b)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	url := "http://" + target + "/"
	n := samples(200)
	// Beside agentjail (TestMain's directory, 0755): the jail's run user
	// runs the client from there.
	dir := filepath.Dir(agentjail)
	client := filepath.Join(dir, "firstbyte")
	if out, err := exec.Command("go", "build", "-o", client, "./testdata/firstbyte").CombinedOutput(); err != nil {
		b.Fatalf("go build testdata/firstbyte: %v\n%s", err, out)
	}
	// run runs cmd in a jail made with flags; it prints each request's
	// phases as curl's -w does time_connect, time_pretransfer (for a
	// proxy: the CONNECT answered) and time_starttransfer, which run
	// returns.
	run := func(flags []string, cmd ...string) (phases [3][]time.Duration, err error) {
		c := exec.Command(agentjail, append(append(append([]string{"run"}, flags...), "--"), cmd...)...)
		c.Env, c.Dir = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, "/"
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return phases, fmt.Errorf("%v: %s%s", err, out, stderr.String())
		}
		for i, f := range strings.Fields(string(out)) {
			s, _ := strconv.ParseFloat(f, 64)
			phases[i%3] = append(phases[i%3], time.Duration(s*float64(time.Second)))
		}
		return phases, nil
	}
	curl := func(flags []string, args ...string) ([3][]time.Duration, error) {
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do curl -sSf -o /dev/null -w '%%{time_connect} %%{time_pretransfer} %%{time_starttransfer}\n' "$@"; i=$((i+1)); done`, n)
		return run(flags, append([]string{"sh", "-c", script, "sh"}, args...)...)
	}
	minimal := func(flags []string, via string) ([3][]time.Duration, error) {
		return run(append([]string{"--read", dir}, flags...), client, via, target, strconv.Itoa(n))
	}
	say := func(p [3][]time.Duration) string {
		return fmt.Sprintf("%.3f / %.3f / %.3f", ms2(median(p[0])), ms2(median(p[1])), ms2(median(p[2])))
	}
	// The floor: a CONNECT proxy that is not agentjail's, in C.
	tiny := freePort(b)
	conf := filepath.Join(b.TempDir(), "tinyproxy.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "Port %d\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 600\nMaxClients 100\nLogLevel Critical\n", tiny), 0o644); err != nil {
		b.Fatal(err)
	}
	floor(b, tiny, "tinyproxy", "-d", "-c", conf)
	host, jailed := []string{"--net", "host"}, []string{"--allow-net", target}
	tinyAddr := fmt.Sprintf("127.0.0.1:%d", tiny)
	brokerAddr := fmt.Sprintf("127.0.0.1:%d", launch.BrokerPort) // in the jail
	for range b.N {
		type measure func() ([3][]time.Duration, error)
		for _, by := range []struct {
			name, metric string
			runs         [3]measure // direct, through the broker, through tinyproxy
			plain        measure    // a plain HTTP request through the broker (no CONNECT), or nil
		}{
			{"curl", "", [3]measure{
				func() ([3][]time.Duration, error) { return curl(host, url) },
				func() ([3][]time.Duration, error) { return curl(jailed, "--noproxy", "", "-p", url) },
				func() ([3][]time.Duration, error) { return curl(host, "-x", "http://"+tinyAddr, "-p", url) }},
				func() ([3][]time.Duration, error) { return curl(jailed, "--noproxy", "", url) }},
			{"a minimal client", "-minimal", [3]measure{
				func() ([3][]time.Duration, error) { return minimal(host, "direct") },
				func() ([3][]time.Duration, error) { return minimal(jailed, brokerAddr) },
				func() ([3][]time.Duration, error) { return minimal(host, tinyAddr) }}, nil},
		} {
			var got [3][3][]time.Duration
			for i, m := range by.runs {
				var err error
				if got[i], err = m(); err != nil {
					b.Fatal(err)
				}
			}
			direct, broker, other := got[0], got[1], got[2]
			md, mb, mt := median(direct[2]), median(broker[2]), median(other[2])
			fmt.Printf("%-28s %s: direct median %.3f ms, through the broker %.3f ms: adds %.3f ms (target < 1 ms, n=%d); through tinyproxy %.3f ms: adds %.3f ms\n",
				"connect + first byte", by.name, ms2(md), ms2(mb), ms2(mb-md), n, ms2(mt), ms2(mt-md))
			fmt.Printf("%-28s medians of connected / CONNECT answered / first byte, ms: direct %s, broker %s, tinyproxy %s\n",
				"", say(direct), say(broker), say(other))
			b.ReportMetric(ms2(mb-md), "ms-added"+by.metric)
			b.ReportMetric(ms2(mt-md), "ms-added-tinyproxy"+by.metric)
			if by.plain != nil {
				// The same request without a tunnel: the client's own
				// work for a CONNECT (its second request, the answer
				// read a byte at a time by curl) is not in it.
				p, err := by.plain()
				if err != nil {
					b.Fatal(err)
				}
				mp := median(p[2])
				fmt.Printf("%-28s %s, plain HTTP (no CONNECT): through the broker %.3f ms: adds %.3f ms\n", "", by.name, ms2(mp), ms2(mp-md))
				b.ReportMetric(ms2(mp-md), "ms-added-plain"+by.metric)
			}
		}
	}
}

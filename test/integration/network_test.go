package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
	"github.com/agentjail/agentjail/internal/testutil/fakeopenai"
)

// netRecord is the record's `network` object (docs/supervision.md).
type netRecord struct {
	Mode          string   `json:"mode"`
	Allow         []string `json:"allow"`
	Broker        string   `json:"broker"`
	UpstreamProxy *string  `json:"upstream_proxy"`
	APIRoutes     []struct {
		Name        string   `json:"name"`
		Upstream    string   `json:"upstream"`
		Credentials []string `json:"credentials"`
	} `json:"api_routes"`
	Connections        []netConn `json:"connections"`
	ConnectionsDropped int       `json:"connections_dropped"`
	Totals             struct {
		Connections int   `json:"connections"`
		Allowed     int   `json:"allowed"`
		Refused     int   `json:"refused"`
		OverLimit   int   `json:"over_limit"`
		BytesUp     int64 `json:"bytes_up"`
		BytesDown   int64 `json:"bytes_down"`
	} `json:"totals"`
	RefusedHosts        []string `json:"refused_hosts"`
	RefusedHostsDropped int      `json:"refused_hosts_dropped"`
	LimitsHit           []string `json:"limits_hit"`
	KernelPath          string   `json:"kernel_path"`
}

type netConn struct {
	Proto      string `json:"proto"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Addr       string `json:"addr"`
	Via        string `json:"via"`
	Allowed    bool   `json:"allowed"`
	Rule       string `json:"rule"`
	Status     int    `json:"status"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	Start      string `json:"start"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error"`
	KernelPath bool   `json:"kernel_path"`
}

// hostServer is an HTTP server on the host's loopback answering body.
func hostServer(t *testing.T, body string, tls bool) (port int) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// conn finds the record's connections to host:port.
func (n *netRecord) conns(host string, port int) []netConn {
	var out []netConn
	for _, c := range n.Connections {
		if c.Host == host && c.Port == port {
			out = append(out, c)
		}
	}
	return out
}

// noneRefused checks that a proxy jail's run met no refusal of the
// broker: no host refused, no connection refused (claudeJail.run and
// codexJail.run check every proxy-mode run of the real agents so).
func (n *netRecord) noneRefused(t *testing.T) {
	t.Helper()
	if len(n.RefusedHosts) != 0 || n.Totals.Refused != 0 {
		t.Errorf("the broker refused %d connections, to %q: the agent reached for more than network.allow and its API route give it", n.Totals.Refused, n.RefusedHosts)
	}
}

// apiOnly checks that a proxy jail's agent reached nothing but its API
// route (api:route): the built-in profiles allow nothing else (issue 16).
func (n *netRecord) apiOnly(t *testing.T, route string) {
	t.Helper()
	n.noneRefused(t)
	api := 0
	for _, c := range n.Connections {
		if c.Proto == "api" && c.Rule == "api:"+route && c.Allowed {
			api++
		} else {
			t.Errorf("a connection besides the %s API route: %+v", route, c)
		}
	}
	if api == 0 || n.ConnectionsDropped != 0 || api != n.Totals.Connections {
		t.Errorf("%d requests on the %s route of %d connections (%d dropped)", api, route, n.Totals.Connections, n.ConnectionsDropped)
	}
}

// lines splits a jail's report into its NAME=VALUE lines.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestNetworkProxy: tier1's proxy mode with the real bubblewrap. Through
// the proxy variables, an allowed host is reached (plain HTTP, CONNECT and
// SOCKS5); a host no entry allows gets 403 with the entry to add, said
// once on stderr, and recorded; a direct connection fails; names do not
// resolve in the jail; a name allowed by name that resolves to loopback,
// the metadata address and its IPv4-mapped form are refused; every
// connection is in the record with its rule and bytes.
func TestNetworkProxy(t *testing.T) {
	jailed(t)
	allowed := hostServer(t, "allowed-plain", false)
	allowedTLS := hostServer(t, "allowed-tls", true)
	other := hostServer(t, "must-not-be-reached", false)
	ws, rec := workspace(t), recordPath(t)
	resolvesOnHost := false
	if _, err := net.LookupHost("registry.npmjs.org"); err == nil {
		resolvesOnHost = true
	}
	script := fmt.Sprintf(`
q() { curl -sS -m 20 --noproxy '' "$@" 2>/dev/null; echo " rc=$?"; }
echo "plain=$(q http://127.0.0.1:%[1]d/)"
echo "tls=$(q -k https://127.0.0.1:%[2]d/)"
echo "socks=$(q -x socks5h://127.0.0.1:3128 http://127.0.0.1:%[1]d/)"
echo "refused=$(q http://blocked.example:8080/x)"
echo "refused2=$(q http://blocked.example:8080/y)"
echo "refusedconnect=$(curl -sS -m 20 --noproxy '' -o /dev/null -w '%%{http_connect}' https://blocked.example/ 2>/dev/null; echo " rc=$?")"
echo "loopbackname=$(q http://localhost:%[3]d/)"
echo "metadata=$(q http://169.254.169.254/latest/meta-data/)"
echo "mapped=$(q 'http://[::ffff:169.254.169.254]/latest/meta-data/')"
echo "direct=$(curl -sS -m 5 --noproxy '*' http://127.0.0.1:%[1]d/ 2>/dev/null; echo " rc=$?")"
echo "getent=$(getent hosts registry.npmjs.org; echo " rc=$?")"
`, allowed, allowedTLS, other)
	r := invocation{dir: ws}.run(t, "run", "--user", "1000", "--write", ws, "--record", rec,
		"--allow-net", "127.0.0.1:"+strconv.Itoa(allowed), "--allow-net", "127.0.0.1:"+strconv.Itoa(allowedTLS),
		"--allow-net", "localhost:"+strconv.Itoa(other), "--allow-net", "*:80",
		"--", "sh", "-c", script)
	wantCode(t, r, 0)
	got := lines(r.stdout)
	hint := func(entry string) string {
		return fmt.Sprintf(`to allow it, add network.allow: [%q] to the profile, or pass --allow-net %s`, entry, entry)
	}
	for k, want := range map[string]string{
		"plain":          "allowed-plain rc=0",
		"tls":            "allowed-tls rc=0",
		"socks":          "allowed-plain rc=0",
		"refused":        "agentjail: blocked.example:8080 is not allowed; " + hint("blocked.example:8080"),
		"refusedconnect": "403 rc=56",
		"direct":         " rc=7",
		"getent":         " rc=2",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
	for k, want := range map[string]string{
		"loopbackname": "localhost resolves to ",
		"metadata":     "169.254.169.254 is a link-local address",
		"mapped":       "::ffff:169.254.169.254 is a link-local address",
	} {
		if !strings.HasPrefix(got[k], "agentjail: "+want) || !strings.Contains(got[k], "address, which a jail reaches only where an entry names it") ||
			strings.Contains(got[k], "must-not-be-reached") {
			t.Errorf("%s: %q, want a 403 saying %q", k, got[k], want)
		}
	}
	if !resolvesOnHost {
		t.Log("registry.npmjs.org does not resolve on this host either: getent's failure shows less here")
	}
	if n := strings.Count(r.stderr, "agentjail: network: blocked.example:8080 is not allowed"); n != 1 {
		t.Errorf("the refusal of blocked.example:8080 said %d times on stderr, want once:\n%s", n, r.stderr)
	}

	rc := readRecord(t, rec, 0)
	n := rc.Network
	if n == nil || n.Mode != "proxy" || n.Broker != "127.0.0.1:3128" || len(n.Allow) != 4 || n.UpstreamProxy != nil {
		t.Fatalf("record.network %+v", n)
	}
	var plain []netConn
	for _, c := range n.conns("127.0.0.1", allowed) {
		if !c.Allowed || c.Rule != "127.0.0.1:"+strconv.Itoa(allowed) || c.Addr != "127.0.0.1" || c.BytesDown == 0 || c.Start == "" {
			t.Errorf("allowed connection %+v", c)
		}
		plain = append(plain, c)
	}
	if len(plain) != 2 || !slices.Contains([]string{plain[0].Proto, plain[1].Proto}, "http") || !slices.Contains([]string{plain[0].Proto, plain[1].Proto}, "socks5") {
		t.Errorf("connections to the allowed host %+v, want one http, one socks5", plain)
	}
	if c := n.conns("127.0.0.1", allowedTLS); len(c) != 1 || c[0].Proto != "connect" || !c[0].Allowed || c[0].BytesUp == 0 || c[0].BytesDown == 0 {
		t.Errorf("the CONNECT tunnel %+v", c)
	}
	if c := n.conns("blocked.example", 8080); len(c) != 2 || c[0].Allowed || c[0].Rule != "not-allowed" || c[0].Status != 403 {
		t.Errorf("the refused host %+v", c)
	}
	for _, w := range []struct {
		host string
		port int
		rule string
	}{{"localhost", other, "loopback"}, {"169.254.169.254", 80, "link-local"}, {"::ffff:169.254.169.254", 80, "link-local"}, {"blocked.example", 443, "not-allowed"}} {
		if c := n.conns(w.host, w.port); len(c) != 1 || c[0].Allowed || c[0].Rule != w.rule {
			t.Errorf("%s:%d: %+v, want refused as %s", w.host, w.port, c, w.rule)
		}
	}
	tot := n.Totals
	if tot.Connections != len(n.Connections) || tot.Allowed != 3 || tot.Refused != 6 || tot.Allowed+tot.Refused != tot.Connections || n.ConnectionsDropped != 0 {
		t.Errorf("totals %+v for %d connections", tot, len(n.Connections))
	}
	if !slices.Contains(n.RefusedHosts, "blocked.example:8080") || len(n.RefusedHosts) != 5 {
		t.Errorf("refused_hosts %q", n.RefusedHosts)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// TestNetworkQuietRefusal: under --quiet a refused host is in the record
// alone.
func TestNetworkQuietRefusal(t *testing.T) {
	jailed(t)
	ws, rec := workspace(t), recordPath(t)
	r := invocation{dir: ws}.run(t, "run", "--quiet", "--user", "1000", "--write", ws, "--record", rec, "--",
		"curl", "-fsS", "-m", "20", "-o", "/dev/null", "http://blocked.example/")
	wantCode(t, r, 22)
	if strings.Contains(r.stderr, "blocked.example") {
		t.Errorf("--quiet, yet stderr:\n%s", r.stderr)
	}
	if n := readRecord(t, rec, 22).Network; n == nil || !slices.Equal(n.RefusedHosts, []string{"blocked.example:80"}) {
		t.Errorf("record.network %+v", n)
	}
}

// TestNetworkHostFlagSaid: --net host replacing a profile's filtered
// network is said (a pasted command line must not open it unseen); on a
// profile whose network is the host's already, nothing is.
func TestNetworkHostFlagSaid(t *testing.T) {
	jailed(t)
	for _, c := range []struct {
		profile, want string
	}{
		{"tier1", "agentjail: warning: --net host: the tier1 profile's proxy network is replaced by the host's, unfiltered"},
		{"sealed", "agentjail: warning: --net host: the sealed profile's none network is replaced by the host's, unfiltered"},
		{"tier3", ""},
	} {
		r := aj(t, "run", "--profile", c.profile, "--net", "host", "--", "true")
		wantCode(t, r, 0)
		if said := strings.Contains(r.stderr, "--net host: the "); said != (c.want != "") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("--profile %s --net host: stderr %q", c.profile, r.stderr)
		}
	}
}

// TestNetworkHostSockets: a proxy jail reaches neither the host's abstract
// Unix sockets (they belong to the network namespace) nor a name
// resolver's socket (hidden); a jail with the host's network reaches both,
// which shows the test can see them.
func TestNetworkHostSockets(t *testing.T) {
	jailed(t)
	name := "agentjail-test-" + token()
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // after the parallel subtests
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello-from-the-host\n")
			c.Close()
		}
	}()
	// systemd-resolved's varlink socket and the system bus, made here
	// where this host has none (glibc here reads files and dns only, and
	// no D-Bus daemon runs: nothing on the host asks them); a real one is
	// only connected to.
	sockets := []string{"/run/systemd/resolve/io.systemd.Resolve", "/run/dbus/system_bus_socket"}
	for _, s := range sockets {
		fakeSocket(t, s)
	}
	probe := fmt.Sprintf(`
echo "abstract=$(socat -u ABSTRACT-CONNECT:%s - 2>&1 | head -c 60; echo)"
for s in %s; do
	socat -u OPEN:/dev/null UNIX-CONNECT:$s 2>/dev/null && echo "$s=reached" || echo "$s=refused"
done
`, name, strings.Join(sockets, " "))
	for _, c := range []struct {
		net   string
		reach bool
	}{{"host", true}, {"proxy", false}, {"none", false}} {
		t.Run(c.net, func(t *testing.T) {
			t.Parallel()
			r := aj(t, "run", "--user", "1000", "--net", c.net, "--", "sh", "-c", probe)
			wantCode(t, r, 0)
			got := lines(r.stdout)
			if reached := got["abstract"] == "hello-from-the-host"; reached != c.reach {
				t.Errorf("abstract socket: %q; reachable %v, want %v", got["abstract"], reached, c.reach)
			}
			for _, s := range sockets {
				if reached := got[s] == "reached"; reached != c.reach {
					t.Errorf("%s: %q; reachable %v, want %v", s, got[s], reached, c.reach)
				}
			}
		})
	}
}

// fakeSocket listens on path, where nothing is, for the test's length
// (the directories it makes are removed after); an existing socket is
// left alone.
func fakeSocket(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		return
	}
	top := filepath.Dir(path)
	for {
		if _, err := os.Stat(filepath.Dir(top)); err == nil {
			break
		}
		top = filepath.Dir(top)
	}
	if _, err := os.Stat(top); err != nil {
		t.Cleanup(func() { os.RemoveAll(top) })
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // removes the socket file
	os.Chmod(path, 0o666)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// TestNetworkFloodAndKill: what the agent can do to the broker. It cannot
// take the broker's port (EADDRINUSE, even with SO_REUSEPORT), take the
// loopback down, or see the broker's process; a flood of connections past
// the broker's cap gets 503 naming the cap (in the record's limits_hit),
// connections that say nothing take none of its slots, and once the flood
// is gone the broker serves again.
func TestNetworkFloodAndKill(t *testing.T) {
	jailed(t)
	allowed := hostServer(t, "still-served", false)
	ws, rec := workspace(t), recordPath(t)
	script := fmt.Sprintf(`
import socket, subprocess, os
def bind(addr, family, reuseport):
    s = socket.socket(family)
    if reuseport:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(addr); s.listen(); return "bound"
    except OSError as e:
        return e.strerror
print("steal4=" + bind(("127.0.0.1", 3128), socket.AF_INET, True))
print("steal0=" + bind(("0.0.0.0", 3128), socket.AF_INET, True))
print("steal6=" + bind(("::1", 3128), socket.AF_INET6, True))
r = subprocess.run(["ip", "link", "set", "lo", "down"], capture_output=True, text=True)
print("lodown=%%d" %% r.returncode)
def get():
    r = subprocess.run(["curl", "-sS", "-m", "20", "--noproxy", "", "http://127.0.0.1:%[1]d/"], capture_output=True, text=True)
    return r.stdout.strip().replace("\n", " ")
# Connections that say nothing take no slot: the broker is not woken for
# them before they speak (TCP_DEFER_ACCEPT), so the flood below still
# finds all 512.
silent = [socket.create_connection(("127.0.0.1", 3128)) for i in range(100)]
flood, refused = [], 0
for i in range(600):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT 127.0.0.1:%[1]d HTTP/1.1\r\nHost: 127.0.0.1:%[1]d\r\n\r\n")
    status = s.recv(4096).split(b" ")[1]
    if status == b"503":
        refused += 1
    flood.append(s)
print("refused=%%d" %% refused)
print("during=" + get())
for s in flood + silent:
    s.close()
import time
for i in range(300):
    got = get()
    if got == "still-served":
        break
    time.sleep(0.1)
print("after=" + got)
`, allowed)
	write(t, ws, map[string]string{"flood.py": script})
	r := invocation{dir: ws}.run(t, "run", "--user", "1000", "--write", ws, "--record", rec,
		"--allow-net", "127.0.0.1:"+strconv.Itoa(allowed), "--", "/usr/bin/python3", filepath.Join(ws, "flood.py"))
	wantCode(t, r, 0)
	got := lines(r.stdout)
	for k, want := range map[string]string{
		"steal4": "Address already in use", "steal0": "Address already in use", "lodown": "2",
		"during": "agentjail: the jail has 512 connections open through the broker, its most at once; close some and retry",
		"after":  "still-served", "refused": "88",
	} {
		if got[k] != want {
			t.Errorf("%s=%q, want %q\nstdout:\n%s", k, got[k], want, r.stdout)
		}
	}
	if s := got["steal6"]; s != "Address already in use" && s != "Cannot assign requested address" {
		t.Errorf("steal6=%q", s)
	}
	// The 88 of the flood and the one "during": each in the totals.
	if n := readRecord(t, rec, 0).Network; n == nil || !slices.Equal(n.LimitsHit, []string{"max_connections"}) || n.Totals.OverLimit < 89 {
		t.Errorf("record.network %+v", n)
	}
}

// TestNetworkClaudeKeyStaysOut: the pinned claude completes a prompt
// against its stand-in in a proxy jail (tier1's default) through the
// broker's API route: the stand-in receives the operator's key, while no
// process environment in the jail and no file of the jail's Claude Code
// directory holds it.
// Given only its base URL and key, as an operator's claude is, it reaches
// nothing but that route: the proxy jail's own defaults
// (launch.quietAgents) keep its other traffic off, which the broker would
// refuse (without them, 2.1.197 also calls api.anthropic.com).
func TestNetworkClaudeKeyStaysOut(t *testing.T) {
	jailed(t)
	// The key is spelt in two halves in the tool's command, which claude
	// keeps in its transcript under $CLAUDE_CONFIG_DIR.
	srv := fakeapi.New(t,
		fakeapi.Tool("Bash", map[string]any{"command": `k=sk-ant-fake; k=${k}api-0000; env | grep -c $k; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c $k; grep -rl $k "$CLAUDE_CONFIG_DIR" ~ 2>/dev/null | wc -l; echo "base=$ANTHROPIC_BASE_URL"; echo "key=${ANTHROPIC_API_KEY%%-placeholder-*}"`,
			"description": "look for the key"}),
		fakeapi.Text("done"))
	dir := visibleDir(t)
	r, rec := claudeJail{profile: "tier1", dir: dir, bare: true}.run(t, srv, "--allowedTools=Bash", "--print", "--output-format", "json", "hi")
	wantCode(t, r, 0)
	calls := 0
	for _, q := range srv.Requests() {
		if strings.HasPrefix(q.Path, "/v1/messages") {
			calls++
			if k := q.Header.Get("X-Api-Key"); k != "sk-ant-fakeapi-0000" {
				t.Errorf("the stand-in got X-Api-Key %q, want the operator's key", k)
			}
		}
	}
	if calls < 2 {
		t.Errorf("%d model calls, want 2", calls)
	}
	tr := srv.ToolResults()
	if len(tr) != 1 || tr[0].Content != "0\n0\n0\nbase=http://127.0.0.1:3128/anthropic\nkey=sk-ant-api03-agentjail" {
		t.Errorf("in the jail: %+v", tr)
	}
	n := rec.Network
	if n == nil || len(n.APIRoutes) == 0 || n.APIRoutes[0].Name != "anthropic" || n.APIRoutes[0].Upstream != srv.URL ||
		!slices.Equal(n.APIRoutes[0].Credentials, []string{"ANTHROPIC_API_KEY"}) {
		t.Fatalf("record.network %+v", n)
	}
	api := 0
	for _, c := range n.Connections {
		if c.Proto == "api" && c.Rule == "api:anthropic" && c.Allowed && c.Status == 200 && c.BytesDown > 0 {
			api++
		}
	}
	if api < 2 {
		t.Errorf("%d API requests in the record: %+v", api, n.Connections)
	}
	n.apiOnly(t, "anthropic")
}

// TestNetworkUpstreamProxy: with HTTPS_PROXY in agentjail's own
// environment (an operator's corporate proxy; here the stand-in, which
// answers a CONNECT itself over TLS), the broker goes out through it for
// an allowed host, by name; the jail still sees only the broker, and a
// host not allowed never reaches the operator's proxy.
func TestNetworkUpstreamProxy(t *testing.T) {
	jailed(t)
	dir, rec := visibleDir(t), recordPath(t)
	srv := fakeapi.New(t)
	env := srv.ProxyEnv(t, dir)
	script := fmt.Sprintf(`echo "jail=$HTTPS_PROXY"
echo "allowed=$(curl -sS -m 20 --cacert %[1]s/ca.pem -o /dev/null -w '%%{http_code}' https://api.example.com/ 2>&1)"
echo "refused=$(curl -sS -m 20 --cacert %[1]s/ca.pem -o /dev/null -w '%%{http_connect}' https://other.example/ 2>/dev/null)"
`, dir)
	r := invocation{env: env, dir: dir}.run(t, "run", "--user", "1000", "--write", dir, "--record", rec, "--allow-net", "api.example.com",
		"--", "sh", "-c", script)
	wantCode(t, r, 0)
	got := lines(r.stdout)
	if got["jail"] != "http://127.0.0.1:3128" || got["allowed"] != "200" || got["refused"] != "403" {
		t.Errorf("in the jail: %q\nstderr:\n%s", r.stdout, r.stderr)
	}
	hosts := map[string]bool{}
	for _, q := range srv.Requests() {
		hosts[q.Host] = true
	}
	if !hosts["api.example.com:443"] || !hosts["api.example.com"] || hosts["other.example:443"] {
		t.Errorf("the operator's proxy saw %v", hosts)
	}
	n := readRecord(t, rec, 0).Network
	if n == nil || n.UpstreamProxy == nil || *n.UpstreamProxy != srv.URL {
		t.Fatalf("record.network %+v", n)
	}
	if c := n.conns("api.example.com", 443); len(c) != 1 || !c[0].Allowed || c[0].Via != "upstream-proxy" || c[0].Addr != "" || c[0].BytesDown == 0 {
		t.Errorf("the connection through the operator's proxy: %+v", c)
	}
}

// TestNetworkClaudeSandboxChains: Claude Code's own sandbox in a proxy
// jail chains its proxy to agentjail's broker (it takes the proxy
// variables of its environment as its parent): a sandboxed command's
// request to a host both Claude Code's allowedDomains and network.allow
// name gets through both proxies, and the broker records it.
func TestNetworkClaudeSandboxChains(t *testing.T) {
	jailed(t)
	hostIP, port := hostService(t, "through-both")
	target := fmt.Sprintf("http://%s:%d/", hostIP, port)
	settings := fmt.Sprintf(`{"sandbox":{"enabled":true,"failIfUnavailable":true,"allowUnsandboxedCommands":false,"network":{"allowedDomains":[%q]}}}`, hostIP)
	srv := fakeapi.New(t,
		fakeapi.Tool("Bash", map[string]any{"command": "readlink /proc/self/ns/net; curl -sS -m 20 " + target, "description": "probe"}),
		fakeapi.Text("done"))
	dir := visibleDir(t)
	r, rec := claudeJail{profile: "tier1", dir: dir, flags: []string{"--allow-net", fmt.Sprintf("%s:%d", hostIP, port)}}.run(t, srv,
		"--settings", settings, "--print", "--output-format", "json", "probe")
	wantCode(t, r, 0)
	tr := srv.ToolResults()
	if len(tr) != 1 || !strings.HasPrefix(tr[0].Content, "net:[") || !strings.HasSuffix(strings.TrimSpace(tr[0].Content), "through-both") {
		t.Fatalf("the sandboxed command: %+v", tr)
	}
	if c := rec.Network.conns(hostIP, port); len(c) != 1 || !c[0].Allowed {
		t.Errorf("the broker's record of it: %+v", rec.Network.Connections)
	}
}

// TestNetworkCodexKeyStaysOut: codex exec in a proxy jail (tier1) reaches
// its stand-in through the broker's openai route, by the provider
// agentjail writes in CODEX_HOME/config.toml; the operator's auth.json API
// key is the broker's: the stand-in receives it, while the jail has no
// auth.json and no process environment or file of its Codex directory
// holds it. It reaches nothing but that route: that config.toml
// keeps Codex's analytics and plugins off, which the broker would refuse.
//
// The environments are read twice. In the jail, by codex's shell tool:
// that runs in Codex's own sandbox, a pid namespace of its own, whose
// /proc shows the command's processes but not codex. And from the host,
// while the tool's command waits: every process carrying the run's
// AGENTJAIL_RUN, among them codex itself (scanOnCue). The control: the key
// in codex's own environment alone (exported by a wrapper, kept from its
// commands by Codex's shell_environment_policy), which the check in the
// jail misses and the one from the host finds.
func TestNetworkCodexKeyStaysOut(t *testing.T) {
	jailed(t)
	const key = "sk-operator-codex-key"
	home, _ := operatorCodex(t, `{"auth_mode":"apikey","OPENAI_API_KEY":"`+key+`"}`)
	// The key is spelt in two halves in the command, which codex keeps in
	// its session files under CODEX_HOME.
	inJail := `k=sk-operator-; k=${k}codex-key; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c $k`
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		dir := visibleDir(t)
		scan := scanOnCue(dir)
		srv := fakeopenai.New(t, fakeopenai.Exec(waitForScan+inJail), fakeopenai.Text("done"))
		r, _ := codexJail{profile: "tier1", dir: dir, home: home, before: markRun + "\nk=sk-operator-; export LEAKED=${k}codex-key",
			provider: append(slices.Clone(viaBroker), "-c", `shell_environment_policy.exclude=["LEAKED"]`)}.run(t, srv, "hi")
		wantCode(t, r, 0)
		procs := <-scan
		if out := srv.Outputs(); len(out) != 1 || !strings.HasSuffix(out[0].Output, "Output:\n0\n") {
			t.Errorf("in the jail the key was seen, or the check did not run: %+v", out)
		}
		if c := codexProc(procs); c == nil || !strings.Contains(c.env, key) {
			t.Errorf("from the host, codex's own environment is not seen to hold the key: codex %+v of %d processes", c, len(procs))
		}
	})
	dir := visibleDir(t)
	scan := scanOnCue(dir)
	srv := fakeopenai.New(t,
		fakeopenai.Exec(waitForScan+inJail+`; test -e "$CODEX_HOME/auth.json" && echo auth.json; grep -rl $k "$CODEX_HOME" 2>/dev/null | wc -l; echo "key=${OPENAI_API_KEY%%-placeholder-*}"; grep -c 127.0.0.1:3128/openai "$CODEX_HOME/config.toml"`),
		fakeopenai.Text("done"))
	r, rec := codexJail{profile: "tier1", dir: dir, home: home, before: markRun}.run(t, srv, "hi")
	wantCode(t, r, 0)
	procs := <-scan
	if codexProc(procs) == nil {
		t.Errorf("from the host, codex is not among the run's %d processes: %+v", len(procs), procs)
	}
	for _, p := range procs {
		if strings.Contains(p.env, key) {
			t.Errorf("the environment of the run's process %d %q holds the key", p.pid, p.argv)
		}
	}
	posts := 0
	for _, q := range srv.Requests() {
		if q.Method == "POST" {
			posts++
			if auth := q.Header.Get("Authorization"); auth != "Bearer "+key {
				t.Errorf("the stand-in got Authorization %q, want the operator's key", auth)
			}
		}
	}
	if posts < 2 {
		t.Errorf("%d requests, want 2", posts)
	}
	if out := srv.Outputs(); len(out) != 1 || !strings.HasSuffix(out[0].Output, "Output:\n0\n0\nkey=sk-agentjail\n1\n") {
		t.Errorf("in the jail: %+v", out)
	}
	n := rec.Network
	if n == nil || len(n.APIRoutes) != 2 || n.APIRoutes[1].Name != "openai" || n.APIRoutes[1].Upstream != srv.URL ||
		!slices.Equal(n.APIRoutes[1].Credentials, []string{"auth.json"}) {
		t.Fatalf("record.network %+v", n)
	}
	if cr := codexOf(t, rec).Credentials; cr == nil || cr.Copied || !strings.Contains(cr.Detail, "broker holds its API key") {
		t.Errorf("record.agent.credentials %+v", cr)
	}
	api := 0
	for _, c := range n.Connections {
		if c.Rule == "api:openai" && c.Status == 200 {
			api++
		}
	}
	if api < 2 {
		t.Errorf("%d requests on the openai route: %+v", api, n.Connections)
	}
	n.apiOnly(t, "openai")
}

// markRun, run in the jail before the agent, leaves the run's marker
// (AGENTJAIL_RUN) in .runid of the start directory, for scanOnCue.
const markRun = `echo "$AGENTJAIL_RUN" > .runid`

// waitForScan, at the head of a tool's command, cues scanOnCue and waits
// (at most a minute) until it has read the run's processes.
const waitForScan = `touch .scan-now; for i in $(seq 600); do [ -e .scanned ] && break; sleep 0.1; done; `

// runProc is a process of a run as the host sees it.
type runProc struct {
	pid      int
	exe, env string // env: its environment, entries joined by newlines
	argv     []string
}

// scanOnCue waits (at most a minute) for the jail to touch .scan-now in
// dir, reads from the host every live process carrying the run's marker
// (AGENTJAIL_RUN, which markRun left in dir), whatever pid namespace in the
// jail holds it, then touches .scanned to let the jail go on, and sends
// what it read.
func scanOnCue(dir string) <-chan []runProc {
	ch := make(chan []runProc, 1)
	go func() {
		defer os.WriteFile(filepath.Join(dir, ".scanned"), nil, 0o644)
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, ".scan-now")); err == nil {
				break
			}
		}
		id, _ := os.ReadFile(filepath.Join(dir, ".runid"))
		marker := "AGENTJAIL_RUN=" + strings.TrimSpace(string(id))
		var procs []runProc
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			env, err := os.ReadFile(d + "/environ")
			entries := strings.Split(string(env), "\x00")
			if err != nil || len(id) == 0 || !slices.Contains(entries, marker) {
				continue
			}
			p := runProc{env: strings.Join(entries, "\n")}
			fmt.Sscan(filepath.Base(d), &p.pid)
			p.exe, _ = os.Readlink(d + "/exe")
			cmd, _ := os.ReadFile(d + "/cmdline")
			p.argv = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
			procs = append(procs, p)
		}
		ch <- procs
	}()
	return ch
}

// codexProc is the codex process among procs (the CLI's binary running
// exec, not its sandbox helper), or nil.
func codexProc(procs []runProc) *runProc {
	for i, p := range procs {
		if path.Base(p.exe) == "codex" && path.Base(p.argv[0]) == "codex" && slices.Contains(p.argv, "exec") {
			return &procs[i]
		}
	}
	return nil
}

// TestNetworkCodexSandbox: Codex's own sandbox with network access on
// (sandbox_workspace_write.network_access) leaves its commands the jail's
// network and proxy variables: a command's request goes through the
// broker to a host network.allow names.
func TestNetworkCodexSandbox(t *testing.T) {
	jailed(t)
	port := hostServer(t, "through-the-broker", false)
	srv := fakeopenai.New(t,
		fakeopenai.Exec(fmt.Sprintf("curl -sS -m 20 --noproxy '' http://127.0.0.1:%d/", port)),
		fakeopenai.Text("done"))
	r, rec := codexJail{profile: "tier1", dir: visibleDir(t), env: srv.Env(), flags: []string{"--allow-net", fmt.Sprintf("127.0.0.1:%d", port)},
		provider: append(slices.Clone(viaBroker), "-c", "sandbox_workspace_write.network_access=true")}.run(t, srv, "fetch")
	wantCode(t, r, 0)
	if out := srv.Outputs(); len(out) != 1 || !strings.HasSuffix(strings.TrimSpace(out[0].Output), "through-the-broker") {
		t.Errorf("the sandboxed command: %+v", out)
	}
	if c := rec.Network.conns("127.0.0.1", port); len(c) != 1 || !c[0].Allowed {
		t.Errorf("the broker's record of it: %+v", rec.Network.Connections)
	}
}

// hostService serves body on every address of the host and returns the
// host's first IPv4 address other than loopback, and the port.
func hostService(t *testing.T, body string) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String(), l.Addr().(*net.TCPAddr).Port
		}
	}
	t.Fatal("this host has no IPv4 address besides loopback")
	return "", 0
}

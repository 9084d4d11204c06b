package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscapeNetworkEgress: under plain bubblewrap the agent shares the
// host's network: a service on the host's loopback, and on the host's own
// address, answers it (the hole; cloud metadata at 169.254.169.254 would
// too, on a cloud VM, which this host is not). Under tier1 (proxy) neither
// answers, directly or through the broker, and the metadata address, also
// in its IPv4-mapped form, is refused by the broker. Under sealed (none)
// nothing answers and there is no broker.
func TestEscapeNetworkEgress(t *testing.T) {
	jailed(t)
	hostIP, port := hostService(t, "host-service")
	script := fmt.Sprintf(`
for u in http://127.0.0.1:%[1]d/ http://%[2]s:%[1]d/; do
  echo "direct $u $(curl -sS -m 10 --noproxy '*' $u 2>&1 | head -c 80)"
done
if [ -n "${HTTP_PROXY:-}" ]; then
  for u in http://127.0.0.1:%[1]d/ http://%[2]s:%[1]d/ http://169.254.169.254/latest/meta-data/ 'http://[::ffff:169.254.169.254]/'; do
    echo "broker $u $(curl -sS -m 10 --noproxy '' "$u" 2>&1 | head -c 80)"
  done
fi
`, port, hostIP)
	plain := plainBwrap{cred: uid1000}.run(t, "sh", "-c", script)
	holeShown(t, strings.Count(plain.stdout, "host-service") == 2, "the host's loopback and address answer", plain)

	r := aj(t, "run", "--user", "1000", "--", "sh", "-c", script)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "host-service") {
		t.Errorf("a host service answered in the jail:\n%s", r.stdout)
	}
	for _, want := range []string{
		fmt.Sprintf("broker http://127.0.0.1:%d/ agentjail: 127.0.0.1 is a loopback address", port),
		fmt.Sprintf("broker http://%s:%d/ agentjail: %s is ", hostIP, port, hostIP),
		"broker http://169.254.169.254/latest/meta-data/ agentjail: 169.254.169.254 is a link-local address",
		"broker http://[::ffff:169.254.169.254]/ agentjail: ::ffff:169.254.169.254 is a link-local address",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the jail's output lacks %q:\n%s", want, r.stdout)
		}
	}
	// sealed has no network at all: nothing answers, and no broker is
	// offered; with --net proxy it gets tier1's broker.
	r = aj(t, "run", "--profile", "sealed", "--user", "1000", "--", "sh", "-c", script+`echo "proxy=${HTTP_PROXY:-none}"`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "host-service") || strings.Contains(r.stdout, "broker ") || !strings.Contains(r.stdout, "proxy=none") {
		t.Errorf("sealed reached a host service or has a broker:\n%s", r.stdout)
	}
	r = aj(t, "run", "--profile", "sealed", "--net", "proxy", "--user", "1000", "--", "sh", "-c", `echo "proxy=${HTTP_PROXY:-none}"`)
	if wantCode(t, r, 0); !strings.Contains(r.stdout, "proxy=http://127.0.0.1:") {
		t.Errorf("sealed --net proxy has no broker:\n%s", r.stdout)
	}
}

package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseNetRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		entry string
		want  NetRule
	}{
		{"api.example.com", NetRule{Name: "api.example.com", Port: 443}},
		{"API.Example.COM.:8443", NetRule{Name: "api.example.com", Port: 8443}},
		{"*.example.com", NetRule{Name: "example.com", Wildcard: true, Port: 443}},
		{"*.example.com:*", NetRule{Name: "example.com", Wildcard: true}},
		{"*", NetRule{Any: true, Port: 443}},
		{"*:80", NetRule{Any: true, Port: 80}},
		{"10.1.2.0/24:443", NetRule{Prefix: netip.MustParsePrefix("10.1.2.0/24"), Port: 443}},
		{"169.254.169.254:80", NetRule{Prefix: netip.MustParsePrefix("169.254.169.254/32"), Port: 80}},
		{"127.0.0.1", NetRule{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 443}},
		{"::1", NetRule{Prefix: netip.MustParsePrefix("::1/128"), Port: 443}},
		{"[::1]:8080", NetRule{Prefix: netip.MustParsePrefix("::1/128"), Port: 8080}},
		{"fd00::/8", NetRule{Prefix: netip.MustParsePrefix("fd00::/8"), Port: 443}},
		{"[fd00::/8]:*", NetRule{Prefix: netip.MustParsePrefix("fd00::/8")}},
		{"under_score.internal", NetRule{Name: "under_score.internal", Port: 443}},
		{"[::1:8080]", NetRule{Prefix: netip.MustParsePrefix("::1:8080/128"), Port: 443}},
		{"2001:db8::", NetRule{Prefix: netip.MustParsePrefix("2001:db8::/128"), Port: 443}},
	} {
		got, err := ParseNetRule(c.entry)
		c.want.Entry = c.entry
		if err != nil || got != c.want {
			t.Errorf("ParseNetRule(%q) = %+v, %v; want %+v", c.entry, got, err, c.want)
		}
	}
	for _, c := range []struct{ entry, says string }{
		{"", "an empty entry"},
		{"::1:8080", `"::1:8080" could be an IPv6 address or one with a port; write [::1]:8080 for the port, or [::1:8080] for the address`},
		{":99999", "no host before the port"},
		{"example.com:99999", `port "99999" is not a number from 1 to 65535`},
		{"example.com:0", `port "0"`},
		{"example.com:08", `port "08"`},
		{"example.com:", "a : with no port after it"},
		{"*.", "*. with no domain after it"},
		{"*.*.example.com", "is not a host name"},
		{"a.*.example.com", "is not a host name"},
		{"https://api.example.com/v1", "a URL; write its host alone, api.example.com"},
		{"api.example.com/v1", "neither an IP address nor a CIDR range"},
		{"exa mple.com", "a space"},
		{"-bad.example.com", "is not a host name"},
		{"1.2.3.999", "neither an IP address nor a CIDR range"},
		{"10.1.2.3/24", "has host bits set past its /24; write 10.1.2.0/24"},
		{"[::ffff:10.0.0.1]:443", "an IPv4 address in IPv6 form"},
		{"[::1", "no closing ]"},
		{"[::1]x", "not :PORT"},
		{"[example.com]:443", "holds no IPv6 address"},
		{"fe80::1%eth0", "neither an IP address"},
	} {
		_, err := ParseNetRule(c.entry)
		if !errors.Is(err, ErrBadAllow) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "api.example.com:8443") {
			t.Errorf("ParseNetRule(%q) = %v; want an error saying %q and an example", c.entry, err, c.says)
		}
	}
}

func TestNetRuleMatches(t *testing.T) {
	t.Parallel()
	rule := func(e string) NetRule {
		r, err := ParseNetRule(e)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		entry, name string
		port        int
		want        bool
	}{
		{"api.example.com", "api.example.com", 443, true},
		{"api.example.com", "api.example.com", 80, false},
		{"api.example.com", "x.api.example.com", 443, false},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"*:*", "anything.test", 22, true},
		{"10.0.0.0/8", "10.0.0.1", 443, false}, // an address entry names addresses, not names
	} {
		if got := rule(c.entry).MatchesName(c.name, c.port); got != c.want {
			t.Errorf("%s matches %s:%d = %v", c.entry, c.name, c.port, got)
		}
	}
	r := rule("10.0.0.0/8:*")
	if !r.MatchesAddr(netip.MustParseAddr("10.9.9.9"), 22) || !r.MatchesAddr(netip.MustParseAddr("::ffff:10.9.9.9"), 22) || r.MatchesAddr(netip.MustParseAddr("11.0.0.1"), 22) {
		t.Error("10.0.0.0/8:* matches the wrong addresses")
	}
	if rule("*").MatchesAddr(netip.MustParseAddr("10.0.0.1"), 443) {
		t.Error("* names a private address")
	}
}

// TestValidateNetwork: the mode is one of three words; each bad allow
// entry is named with its origin; an allow list without proxy mode is
// refused.
func TestValidateNetwork(t *testing.T) {
	t.Parallel()
	p, err := Decode("n.yaml", []byte("network:\n  mode: open\n  allow:\n    - ok.example.com\n    - \":99999\"\n    - \"*.\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = Validate(p)
	for _, want := range []string{
		`n.yaml:2:3: network.mode: "open" is not one of host, none, proxy`,
		`n.yaml:5:7: network.allow[1]: ":99999" is not HOST[:PORT]: no host before the port`,
		`n.yaml:6:7: network.allow[2]: "*." is not HOST[:PORT]: *. with no domain after it`,
		`n.yaml:4:7: network.allow[0]: is used only with network.mode: proxy, and the mode is open`,
	} {
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant %q", err, want)
		}
	}
	p, _ = Decode("m.yaml", []byte("network:\n  allow: [a.example.com]\n"))
	if err := Validate(p); err == nil || !strings.Contains(err.Error(), "the mode is host (the default); set mode: proxy (--net proxy)") {
		t.Errorf("allow without a mode: %v", err)
	}
	p, _ = Decode("ok.yaml", []byte("network:\n  mode: proxy\n  allow: [a.example.com, \"10.0.0.0/8:*\"]\n"))
	if err := Validate(p); err != nil || p.NetMode() != NetProxy {
		t.Errorf("a good network: %v", err)
	}
}

// TestNetworkTightenedToNone: a child profile (or the command line) may
// take a proxy profile with an allow list to none: the list it did not
// write opens nothing there. A file that writes both is still told; and a
// mistyped mode is reported as such, not as loosening.
func TestNetworkTightenedToNone(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"proxied.yaml": "network:\n  mode: proxy\n  allow: [a.example.com, b.example.com]\n",
		"shut.yaml":    "extends: proxied\nnetwork:\n  mode: none\n",
		"both.yaml":    "network:\n  mode: none\n  allow: [a.example.com]\n",
		"typo.yaml":    "extends: proxied\nnetwork:\n  mode: proxie\n",
	})
	p, err := l.Load("shut")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(p); err != nil || p.NetMode() != NetNone {
		t.Errorf("a child tightening to none: %v, mode %s", err, p.NetMode())
	}
	p, err = l.Load("proxied")
	if err != nil {
		t.Fatal(err)
	}
	p.Network.Mode, p.Origins["network.mode"] = NetNone, "--net"
	if err := Validate(p); err != nil {
		t.Errorf("--net none on a proxy profile: %v", err)
	}
	p, err = l.Load("both")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(p); err == nil || !strings.Contains(err.Error(), "profiles/both.yaml:3:11: network.allow[0]: is used only with network.mode: proxy, and the mode is none") {
		t.Errorf("mode none and an allow list in one file: %v", err)
	}
	p, err = l.Load("typo")
	if err == nil {
		err = Validate(p)
	}
	if err == nil || !strings.Contains(err.Error(), `network.mode: "proxie" is not one of host, none, proxy`) || strings.Contains(err.Error(), "cannot loosen") {
		t.Errorf("a mistyped mode: %v", err)
	}
}

package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentjail/agentjail/policy"
)

// Refusals: why a destination was refused, as the record's rule says it.
const (
	NotAllowed = "not-allowed" // no allow entry covers the host and port
	// Malformed is a destination that is neither a host name nor an IP
	// address, or a port out of range: a jail's SOCKS5 request may carry
	// any bytes as its name.
	Malformed = "malformed"
)

// special are the address ranges a jail reaches only where an allow entry
// names the address (policy.NetRule.MatchesAddr): what a name that
// resolves there, or an IP literal, would otherwise open. IPv6 forms that
// embed an IPv4 address (mapped, NAT64, 6to4) are judged by that address
// (embedded).
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // 169.254.169.254: the clouds' metadata
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},   // 100.100.100.200: Alibaba's metadata
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"}, // 192.0.0.192: Oracle's classic metadata
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},      // 255.255.255.255 too
	{netip.MustParsePrefix("168.63.129.16/32"), "metadata"}, // Azure's WireServer
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "reserved"}, // IPv4-compatible, deprecated
	{netip.MustParsePrefix("100::/64"), "reserved"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "nat64"},
	{netip.MustParsePrefix("2001::/32"), "teredo"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "private"},
	{netip.MustParsePrefix("fc00::/7"), "private"}, // fd00:ec2::254 (AWS) and the other clouds' IPv6 metadata
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// embedded returns the IPv4 address an IPv6 address carries where the
// network would deliver to it: IPv4-mapped (::ffff:a.b.c.d), NAT64
// (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::).
func embedded(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case netip.MustParsePrefix("2002::/16").Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// classify names the kind of special address a is, "" for an ordinary
// one; host are the host's own addresses (a service bound to 0.0.0.0
// answers on each).
func classify(a netip.Addr, host []netip.Addr) string {
	a = a.WithZone("")
	if v4, ok := embedded(a); ok {
		if c := classify(v4, host); c != "" {
			return c
		}
		a = v4
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.class
		}
	}
	for _, h := range host {
		if h.WithZone("").Unmap() == a {
			return "host-address"
		}
	}
	return ""
}

// classText names an address class in a sentence: "a loopback
// address", "one of the host's own addresses".
func classText(class string) string {
	if class == "host-address" {
		return "one of the host's own addresses"
	}
	if strings.ContainsRune("aeiou", rune(class[0])) {
		return "an " + class + " address"
	}
	return "a " + class + " address"
}

// verdict is what the broker decided about one destination.
type verdict struct {
	allowed bool
	// rule is the allow entry that allowed it, or why it was refused
	// (NotAllowed, or an address class).
	rule string
	// addrs are the checked addresses to dial, in order; proxy, when set,
	// is the operator's proxy to go through instead (it resolves the
	// name).
	addrs []netip.Addr
	proxy *url.URL
	// why is the refusal's explanation, with the entry to add.
	why string
	err error // the name could not be resolved
}

// decide judges host:port (a name or an IP literal) against the rules and,
// once a rule allows a name, resolves it and judges each address; scheme
// (http or https) chooses the operator's proxy setting that applies.
func (b *Broker) decide(ctx context.Context, scheme, host string, port int) verdict {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	a, err := netip.ParseAddr(host)
	if err != nil && !policy.IsHostName(host) || port < 1 || port > 65535 {
		// Quoted: the name is the jail's, and the why goes to the
		// operator's terminal.
		return verdict{rule: Malformed, why: fmt.Sprintf("%s is not a host name or address and a port", policy.Quote(hostPort(clipHost(host), port)))}
	}
	if err == nil {
		a = a.WithZone("")
		if r, ok := b.namedBy(a, port); ok {
			return verdict{allowed: true, rule: r, addrs: []netip.Addr{a}, proxy: b.proxyFor(scheme, a.String(), port)}
		}
		if c := classify(a, b.cfg.HostAddrs); c != "" {
			return verdict{rule: c, why: fmt.Sprintf("%s is %s, which a jail reaches only where an entry names it", a, classText(c)) + addHint(a.String(), port)}
		}
		if r, ok := b.ruleFor(host, port); ok {
			return verdict{allowed: true, rule: r, addrs: []netip.Addr{a}, proxy: b.proxyFor(scheme, a.String(), port)}
		}
		return verdict{rule: NotAllowed, why: fmt.Sprintf("%s is not allowed", hostPort(a.String(), port)) + addHint(a.String(), port)}
	}
	r, ok := b.ruleFor(host, port)
	if !ok {
		return verdict{rule: NotAllowed, why: fmt.Sprintf("%s is not allowed", hostPort(host, port)) + addHint(host, port)}
	}
	if p := b.proxyFor(scheme, host, port); p != nil {
		return verdict{allowed: true, rule: r, proxy: p}
	}
	addrs, err := b.resolve(ctx, host)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			err = fmt.Errorf("no address")
		}
		return verdict{allowed: true, rule: r, err: fmt.Errorf("cannot resolve %s: %w", host, err)}
	}
	v := verdict{allowed: true, rule: r}
	var refusedAddr netip.Addr
	var class string
	for _, a := range addrs {
		a = a.WithZone("")
		c := classify(a, b.cfg.HostAddrs)
		if _, named := b.namedBy(a, port); c != "" && !named {
			if class == "" {
				refusedAddr, class = a, c
			}
			continue
		}
		v.addrs = append(v.addrs, a)
	}
	if len(v.addrs) == 0 {
		return verdict{rule: class, why: fmt.Sprintf("%s resolves to %s, %s, which a jail reaches only where an entry names it", host, refusedAddr, classText(class)) +
			addHint(refusedAddr.String(), port)}
	}
	return v
}

// resolve looks host up on the host's resolver, but for localhost and the
// names under it, which are loopback without asking anyone (RFC 6761 6.3):
// a host whose /etc/hosts lacks localhost, or a resolver that answers for
// it, must not make it anything else.
func (b *Broker) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, nil
	}
	return b.cfg.Resolve(ctx, host)
}

// ruleFor returns the entry that allows name (or any host, for an IP
// literal) on port.
func (b *Broker) ruleFor(name string, port int) (string, bool) {
	for _, r := range b.cfg.Rules {
		if r.MatchesName(name, port) {
			return r.Entry, true
		}
	}
	return "", false
}

// namedBy returns the address entry that names a on port.
func (b *Broker) namedBy(a netip.Addr, port int) (string, bool) {
	for _, r := range b.cfg.Rules {
		if r.MatchesAddr(a, port) {
			return r.Entry, true
		}
	}
	return "", false
}

// proxyFor is the operator's proxy for scheme://host:port, nil for none.
func (b *Broker) proxyFor(scheme, host string, port int) *url.URL {
	if b.cfg.Proxy == nil {
		return nil
	}
	u, err := b.cfg.Proxy(&url.URL{Scheme: scheme, Host: hostPort(host, port)})
	if err != nil {
		return nil
	}
	return u
}

// hostPort joins host and port, brackets around an IPv6 address.
func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// addHint is the end of a refusal's message: the entry to add.
func addHint(host string, port int) string {
	entry := host
	if strings.Contains(host, ":") {
		entry = "[" + host + "]"
	}
	if port != policy.DefaultPort || strings.Contains(host, ":") {
		entry += ":" + strconv.Itoa(port)
	}
	return fmt.Sprintf("; to allow it, add network.allow: [%q] to the profile, or pass --allow-net %s", entry, entry)
}

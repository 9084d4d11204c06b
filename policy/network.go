package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Values for Network.Mode.
const (
	NetHost  = "host"  // the host's network, unfiltered (the default)
	NetNone  = "none"  // loopback only
	NetProxy = "proxy" // loopback only; out through agentjail's broker
)

// DefaultPort is the port of an allow entry that names none.
const DefaultPort = 443

// Network is what the jail may reach.
type Network struct {
	// Mode is "host" (default: the host's network, unfiltered), "none" (a
	// network namespace of the jail's own with loopback only) or "proxy"
	// (the same namespace, and agentjail's broker on its loopback as the
	// only way out: to the hosts of Allow, and to the agent's API through
	// the broker's API route, which adds the operator's credential outside
	// the jail). A child profile cannot loosen it (none, then proxy, then
	// host).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Allow lists what the broker lets the jail reach in proxy mode:
	// HOST[:PORT], *.DOMAIN[:PORT] (its subdomains), *[:PORT] (any host),
	// an IP address or a CIDR range ([IPv6] in brackets before a port). PORT
	// is a number or *; without one, 443. Loopback, link-local (cloud
	// metadata), private, CGNAT and other special addresses are refused
	// unless an IP or CIDR entry names them.
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
}

// NetMode is the network mode p runs with.
func (p Policy) NetMode() string {
	if p.Network.Mode == "" {
		return NetHost
	}
	return p.Network.Mode
}

// netRank orders the modes from loosest to strictest.
var netRank = map[string]int{NetHost: 0, NetProxy: 1, NetNone: 2}

// NetRule is one network.allow entry, parsed.
type NetRule struct {
	Entry string // as written
	// Name is the host name of a name entry, lower case without a final
	// dot; with Wildcard it is the domain whose subdomains match. Empty for
	// an address entry, and for Any.
	Name     string
	Wildcard bool
	Any      bool // "*": every host
	// Prefix is an address entry's range (a single address is a /32 or
	// /128); invalid for a name entry.
	Prefix netip.Prefix
	Port   int // 0: any port
}

// ErrBadAllow is what a malformed allow entry is.
var ErrBadAllow = errors.New("not HOST[:PORT]")

// ParseNetRule parses one allow entry.
func ParseNetRule(entry string) (NetRule, error) {
	r := NetRule{Entry: entry, Port: DefaultPort}
	bad := func(why string) (NetRule, error) {
		return NetRule{}, fmt.Errorf("%w: %s (entries look like api.example.com, *.example.com, api.example.com:8443, 10.0.0.0/8:*)", ErrBadAllow, why)
	}
	switch {
	case entry == "":
		return bad("an empty entry")
	case strings.Contains(entry, "://"):
		if u, err := url.Parse(entry); err == nil && u.Host != "" {
			return bad(fmt.Sprintf("a URL; write its host alone, %s", u.Host))
		}
		return bad("a URL; write its host alone")
	case strings.ContainsFunc(entry, func(c rune) bool { return c <= ' ' || c > '~' }):
		return bad("it holds a space or a character no host name has (write an international name in its xn-- form)")
	}
	host, port := entry, ""
	switch {
	case strings.HasPrefix(entry, "["):
		end := strings.Index(entry, "]")
		if end < 0 {
			return bad("an IPv6 address with no closing ]")
		}
		host, port = entry[1:end], entry[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return bad("something after ] that is not :PORT")
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(entry, ":") {
			return bad("a : with no port after it")
		}
		if !strings.Contains(host, ":") {
			return bad("[...] holds no IPv6 address")
		}
	case strings.Count(entry, ":") == 1:
		host, port, _ = strings.Cut(entry, ":")
		if port == "" {
			return bad("a : with no port after it")
		}
	}
	if host == "" {
		return bad("no host before the port")
	}
	if port != "" {
		if port == "*" {
			r.Port = 0
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad(fmt.Sprintf("port %q is not a number from 1 to 65535, or *", port))
		} else {
			r.Port = n
		}
	}
	switch {
	case host == "*":
		r.Any = true
	case strings.Contains(host, ":") || strings.Contains(host, "/") || isIPv4(host):
		if i := strings.LastIndexByte(host, ':'); !strings.HasPrefix(entry, "[") && i > 0 && strings.Trim(host[i+1:], "0123456789") == "" {
			// ::1:8080 is an address, and most likely meant [::1]:8080.
			if _, err := netip.ParseAddr(host[:i]); err == nil {
				return bad(fmt.Sprintf("%q could be an IPv6 address or one with a port; write [%s]:%s for the port, or [%s] for the address", host, host[:i], host[i+1:], host))
			}
		}
		pfx, err := netip.ParsePrefix(host)
		if err != nil {
			a, aerr := netip.ParseAddr(host)
			if aerr != nil || a.Zone() != "" {
				return bad(fmt.Sprintf("%q is neither an IP address nor a CIDR range", host))
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		if pfx.Addr().Zone() != "" || pfx.Masked() != pfx {
			return bad(fmt.Sprintf("%q has host bits set past its /%d; write %s", host, pfx.Bits(), pfx.Masked()))
		}
		if pfx.Addr().Is4In6() {
			return bad(fmt.Sprintf("%q is an IPv4 address in IPv6 form; write the IPv4 address", host))
		}
		r.Prefix = pfx
	default:
		name, wild := strings.CutPrefix(strings.ToLower(host), "*.")
		name = strings.TrimSuffix(name, ".")
		if wild && name == "" {
			return bad("*. with no domain after it, as in *.example.com")
		}
		if !IsHostName(name) {
			return bad(fmt.Sprintf("%q is not a host name (letters, digits, - and dots; * only as the first label, *.example.com)", host))
		}
		r.Name, r.Wildcard = name, wild
	}
	return r, nil
}

// isIPv4 says whether s looks like a dotted IPv4 address (all digits and
// dots), right or wrong: 1.2.3.999 is a bad address, not a host name.
func isIPv4(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == "" && strings.Count(s, ".") == 3
}

// IsHostName checks the syntax of a lower-case DNS name (RFC 1123
// labels; an underscore allowed, as names in use have one).
func IsHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// MatchesPort says whether the rule covers port.
func (r NetRule) MatchesPort(port int) bool { return r.Port == 0 || r.Port == port }

// MatchesName says whether the rule covers host name (lower case, without
// a final dot) on port: an exact name, a subdomain of a wildcard's domain,
// or any name for "*".
func (r NetRule) MatchesName(name string, port int) bool {
	if !r.MatchesPort(port) {
		return false
	}
	switch {
	case r.Any:
		return true
	case r.Wildcard:
		return strings.HasSuffix(name, "."+r.Name)
	}
	return r.Name != "" && name == r.Name
}

// MatchesAddr says whether an address entry (not "*", not a name) covers
// a on port: what names a special address so that it may be reached.
func (r NetRule) MatchesAddr(a netip.Addr, port int) bool {
	return r.Prefix.IsValid() && r.MatchesPort(port) && r.Prefix.Contains(a.Unmap())
}

// ParseNetRules parses a policy's allow list (validated: Validate has
// checked every entry).
func ParseNetRules(allow []string) []NetRule {
	out := make([]NetRule, 0, len(allow))
	for _, e := range allow {
		if r, err := ParseNetRule(e); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// network checks network: its mode, and every allow entry.
func (v *validator) network(n Network) {
	v.oneOf("network.mode", n.Mode, NetHost, NetNone, NetProxy)
	for i, e := range n.Allow {
		if _, err := ParseNetRule(e); err != nil {
			v.add(fmt.Sprintf("network.allow[%d]", i), fmt.Sprintf("%q is %v", e, err))
		}
	}
	if len(n.Allow) > 0 && n.Mode != NetProxy {
		if n.Mode == NetNone && !v.sameSource("network.mode", "network.allow", len(n.Allow)) {
			// Tightened to none by a child profile or the command line:
			// the list it was given elsewhere has nothing to open.
			return
		}
		mode := n.Mode
		if mode == "" {
			mode = NetHost + " (the default)"
		}
		v.add("network.allow[0]", fmt.Sprintf("is used only with network.mode: proxy, and the mode is %s; set mode: proxy (--net proxy), or drop the allow list", mode))
	}
}

// sameSource says whether field was set by the file (or the command line)
// that set any of list's n entries.
func (v *validator) sameSource(field, list string, n int) bool {
	src := sourceOf(v.p.Origins.Of(field))
	for i := range n {
		if sourceOf(v.p.Origins.Of(fmt.Sprintf("%s[%d]", list, i))) == src {
			return true
		}
	}
	return false
}

// sourceOf is an origin's file ("FILE:LINE:COL" less its position), or
// "the command line" for a flag's ("--net").
func sourceOf(origin string) string {
	if strings.HasPrefix(origin, "--") {
		return "the command line"
	}
	for range 2 {
		if i := strings.LastIndexByte(origin, ':'); i >= 0 && strings.Trim(origin[i+1:], "0123456789") == "" {
			origin = origin[:i]
		}
	}
	return origin
}

package record

// Network is the run record's `network` object: the jail's network mode
// and, in proxy mode, every connection the broker saw (docs/network.md).
type Network struct {
	// Mode is host, none or proxy.
	Mode string `json:"mode"`
	// Allow are the allow entries in effect (proxy mode).
	Allow []string `json:"allow"`
	// Broker is the broker's address inside the jail ("127.0.0.1:3128");
	// empty outside proxy mode, or when it never started.
	Broker string `json:"broker"`
	// UpstreamProxy is the operator's proxy the broker went out through,
	// its password removed; null when none was set.
	UpstreamProxy *string `json:"upstream_proxy"`
	// APIRoutes are the broker's routes to the agents' APIs.
	APIRoutes []APIRoute `json:"api_routes"`
	// Connections are the first MaxConnections connections and requests,
	// in the order they ended; ConnectionsDropped counts those left out.
	// Totals count them all.
	Connections        []Connection `json:"connections"`
	ConnectionsDropped int          `json:"connections_dropped"`
	Totals             NetTotals    `json:"totals"`
	// RefusedHosts are the first MaxRefusedHosts host:port the broker
	// refused, once each; RefusedHostsDropped counts the refusals of
	// others.
	RefusedHosts        []string `json:"refused_hosts"`
	RefusedHostsDropped int      `json:"refused_hosts_dropped"`
	// KernelPath says whether tunnels' downloads may take the kernel path
	// (docs/network.md): on, off (set so), or unavailable and why; empty
	// when no tunnel was made.
	KernelPath string `json:"kernel_path,omitempty"`
	// LimitsHit names the broker's caps the jail reached
	// (max_connections, max_refused_hosts).
	LimitsHit []string `json:"limits_hit"`
}

// MaxConnections caps Network.Connections.
const MaxConnections = 1000

// MaxRefusedHosts caps Network.RefusedHosts, and the refusals said on the
// operator's terminal: a jail that asks for ever new names grows neither
// agentjail's memory nor its output past it.
const MaxRefusedHosts = 200

// APIRoute is one of the broker's API routes: requests to
// http://BROKER/NAME/... go to Upstream, with the operator's credential
// put in place of the jail's placeholder.
type APIRoute struct {
	Name     string `json:"name"`     // anthropic, openai
	Upstream string `json:"upstream"` // the operator's base URL
	// Credentials name the variables whose values the broker holds and the
	// jail has placeholders of (ANTHROPIC_API_KEY, claude_login, ...).
	Credentials []string `json:"credentials"`
}

// Connection is one connection or request through the broker.
type Connection struct {
	// Proto is connect (an HTTP CONNECT tunnel), http (a plain HTTP
	// request forwarded), socks5 or api (a request on an API route).
	Proto string `json:"proto"`
	Host  string `json:"host"`
	Port  int    `json:"port"`
	// Addr is the address dialed; empty when refused, or when the
	// operator's proxy (Via) resolved the name.
	Addr    string `json:"addr,omitempty"`
	Via     string `json:"via,omitempty"` // "upstream-proxy"
	Allowed bool   `json:"allowed"`
	// Rule is the allow entry that let it through (or the API route's
	// name), or why it was refused: not-allowed, or the kind of address
	// (loopback, link-local, private, cgnat, metadata, host-address, ...).
	Rule string `json:"rule"`
	// Status is the HTTP status answered, where there is one.
	Status     int    `json:"status,omitempty"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
	Start      Time   `json:"start"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	// KernelPath: the download half of this tunnel moved to the kernel
	// path (the jail's socket was written to directly, not by TCP).
	KernelPath bool `json:"kernel_path,omitempty"`
}

// NetTotals count every connection, recorded or not.
type NetTotals struct {
	Connections int `json:"connections"`
	Allowed     int `json:"allowed"`
	Refused     int `json:"refused"`
	// OverLimit counts the connections answered 503 because MaxConns were
	// open; they are among Connections and Refused, not in the list.
	OverLimit int   `json:"over_limit"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
}

// NewNetwork is the network object of a run in mode with the allow
// entries allow: every list empty, none null.
func NewNetwork(mode string, allow []string) *Network {
	if allow == nil {
		allow = []string{}
	}
	return &Network{Mode: mode, Allow: allow, APIRoutes: []APIRoute{}, Connections: []Connection{},
		RefusedHosts: []string{}, LimitsHit: []string{}}
}

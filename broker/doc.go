// Package broker is agentjail's network broker for a jail in proxy mode:
// the jail's only way out. It serves, on listeners the exec stage made in
// the jail's network namespace (execstage's control channel), HTTP CONNECT,
// plain HTTP forwarding and SOCKS5 to the hosts network.allow names, and
// the API routes, on which the agent's API requests reach the operator's
// upstream with the operator's credential put in place of the jail's
// placeholder. It runs in agentjail's own process, dialing out from the
// host's namespace: names are resolved here, and each address checked
// (loopback, link-local, private and the other special ranges are refused
// unless an entry names them) before it is dialed, or the operator's own
// proxy is used. Every connection goes into the record. A tunnel's
// download, or a big plain HTTP body (bulkBody), may move to the kernel
// path (kernel_linux.go): written into the jail socket's receive queue,
// without a second TCP crossing.
//
// It knows no profile and starts no process: launch configures it from
// the policy and owns its lifetime (one run).
package broker

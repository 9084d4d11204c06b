package mounts

import (
	"fmt"
	"slices"

	"github.com/agentjail/agentjail/policy"
)

// resolverSockets are the sockets through which a process resolves host
// names without a network of its own: a jail without the host's network
// (network.mode none or proxy) must not reach them, or it could still turn
// names into addresses, and leak data in the names it asks for (DNS
// queries go out from the resolver, on the host). Paths from the Debian 12
// packages; each is hidden where it exists.
var resolverSockets = []string{
	"/run/systemd/resolve/io.systemd.Resolve",         // systemd-resolved's varlink (libnss_resolve)
	"/run/systemd/resolve/io.systemd.Resolve.Monitor", // beside it
	"/run/dbus/system_bus_socket",                     // org.freedesktop.resolve1, Avahi, NetworkManager: the whole system bus
	"/run/nscd/socket",                                // glibc asks nscd (unscd) for hosts
	"/run/avahi-daemon/socket",                        // libnss_mdns: multicast DNS
	"/var/lib/sss/pipes/nss",                          // sssd
	"/run/samba/winbindd/pipe",                        // libnss_wins: NetBIOS names
}

// containerSockets are the container runtimes' API sockets tier1 denies:
// a container started through one is not held to the jail's network.
var containerSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/k3s/containerd/containerd.sock", "/run/crio/crio.sock", "/run/podman/podman.sock",
	"/var/run/podman/podman.sock",
}

// denyList is what deny hides: the policy's deny list, and without the
// host's network the resolvers' sockets.
func (r *renderer) denyList() []string {
	if r.p.NetMode() == policy.NetHost {
		return r.p.Filesystem.Deny
	}
	return slices.Concat(r.p.Filesystem.Deny, resolverSockets)
}

// network checks what the network mode needs: in proxy mode, the exec
// stage's listeners for the broker; and says, as a degradation, where a
// container runtime's socket the run user can reach is left in a proxy
// jail: through it the agent can start a container on the runtime's
// network (`docker run --network host`), around every egress rule.
func (r *renderer) network() {
	if r.p.NetMode() != policy.NetProxy {
		return
	}
	if len(r.in.Listen) == 0 {
		r.errs = append(r.errs, fmt.Errorf("network.mode proxy: the plan has no broker address (mounts.Input.Listen)"))
	}
	var said []string
	for _, s := range containerSockets {
		if t, err := resolve(r.in.Disk, s); err == nil {
			s = t
		}
		if slices.Contains(said, s) || !exists(r.in.Disk, s) || !r.in.User.reachable(r.in.Disk, s) || r.hidden(s) {
			continue
		}
		said = append(said, s)
		r.plan.Degradations = append(r.plan.Degradations, fmt.Sprintf(
			"network: the container runtime's socket %s is reachable in the jail: a container started through it has the runtime's network, not the broker's rules (network.allow); deny it (filesystem.deny) where the egress rules must hold", s))
	}
}

// hidden says whether p (resolved), or a directory above it, is among
// what deny hid.
func (r *renderer) hidden(p string) bool {
	for _, d := range r.plan.Denied {
		if p == d || under(p, d) {
			return true
		}
	}
	return false
}

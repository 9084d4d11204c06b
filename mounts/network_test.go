package mounts

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/policy"
)

// TestRenderNetwork: without the host's network the jail gets a network
// namespace of its own and the resolvers' sockets are hidden; a proxy jail
// gets the broker's listeners through the exec stage, and a container
// socket it can reach is said as a degradation, once per socket.
func TestRenderNetwork(t *testing.T) {
	t.Parallel()
	render := func(profile, mode string, listen []string) (Plan, error) {
		in := input(t, profile, "/srv/proj")
		fake := host()
		fake["run/nscd"] = dir(0o755, 0)
		fake["run/nscd/socket"] = node(fs.ModeSocket|0o666, 0, 0, "")
		fake["run/dbus"] = dir(0o755, 0)
		fake["run/dbus/system_bus_socket"] = node(fs.ModeSocket|0o666, 0, 0, "")
		in.Disk = fake
		if mode != "" {
			in.Policy.Network.Mode = mode
		}
		in.Listen = listen
		return Render(in)
	}
	hides := func(p Plan, path string) bool { return slices.Contains(p.Denied, path) }
	broker := []string{"127.0.0.1:3128", "[::1]:3128"}

	plan, err := render("tier3", "", nil)
	if err != nil || slices.Contains(plan.Args, "--unshare-net") || hides(plan, "/run/nscd/socket") || slices.Contains(plan.Args, "--listen") {
		t.Errorf("host network: %v; --unshare-net or hidden resolvers in %q", err, plan.Args)
	}
	plan, err = render("tier3", policy.NetNone, nil)
	if err != nil || !slices.Contains(plan.Args, "--unshare-net") || !hides(plan, "/run/nscd/socket") || !hides(plan, "/run/dbus/system_bus_socket") ||
		slices.Contains(plan.Args, "--control-fd") || len(plan.Degradations) != 0 {
		t.Errorf("none: %v; args %q, denied %q, degradations %q", err, plan.Args, plan.Denied, plan.Degradations)
	}
	plan, err = render("tier1", "", broker)
	if err != nil || !slices.Contains(plan.Args, "--unshare-net") || !hides(plan, "/run/nscd/socket") || !slices.Contains(plan.Args, "--control-fd") {
		t.Errorf("tier1: %v; args %q, denied %q", err, plan.Args, plan.Denied)
	}
	if len(plan.Degradations) != 0 {
		t.Errorf("tier1 denies the container sockets, yet: %q", plan.Degradations)
	}
	plan, err = render("tier2", "", broker)
	if err != nil || len(plan.Degradations) != 1 || !strings.Contains(plan.Degradations[0], "socket /run/docker.sock is reachable in the jail") {
		t.Errorf("tier2: %v; degradations %q", err, plan.Degradations)
	}
	if _, err := render("tier1", "", nil); err == nil || !strings.Contains(err.Error(), "no broker address") {
		t.Errorf("proxy without listeners: %v", err)
	}
}

package execstage

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// listen makes a TCP socket listening on addr in the stage's network
// namespace (the jail's), hands it to the supervisor over the control
// channel and closes the stage's copy. The agent, which starts later in
// the same namespace, cannot take the address (no SO_REUSEPORT is set, so
// its bind fails with EADDRINUSE). An IPv6 address on a host without IPv6
// (no AF_INET6, or no ::1) is skipped: nothing listens there and nothing
// is sent.
func listen(control int, addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().Is4In6() || ap.Addr().Zone() != "" {
		return fmt.Errorf("%s %q: not IP:PORT", FlagListen, addr)
	}
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
	if ap.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if family == unix.AF_INET6 && err == unix.EAFNOSUPPORT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen on %s: socket: %w", addr, err)
	}
	defer unix.Close(fd)
	if family == unix.AF_INET6 {
		// Only ::1: an IPv4 client reaches the other listener.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fmt.Errorf("listen on %s: IPV6_V6ONLY: %w", addr, err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if family == unix.AF_INET6 && err == unix.EADDRNOTAVAIL {
			return nil
		}
		return fmt.Errorf("listen on %s: bind: %w", addr, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("listen on %s: getsockname: %w", addr, err)
	}
	switch sa := got.(type) {
	case *unix.SockaddrInet4:
		ap = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		ap = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	if err := SendControl(control, Message{Kind: KindListener, Addr: ap.String()}, fd); err != nil {
		return fmt.Errorf("listen on %s: send it to the supervisor: %w", addr, err)
	}
	return nil
}

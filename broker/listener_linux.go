package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrListener is a listener the broker will not serve on.
var ErrListener = errors.New("not the jail's listener")

// Listener checks that f, a socket the exec stage made and sent over its
// control channel, is one the broker may serve on, and returns it as a
// net.Listener (f can be closed). It must listen, on loopback at port,
// without SO_REUSEPORT (another socket of the same user could join it and
// take a share of the jail's connections), and in a network namespace
// other than agentjail's: one in agentjail's own would serve the API
// routes, with the operator's credentials, to every process of the host.
// The namespace is told by its cookie (SO_NETNS_COOKIE, Linux 5.14), else
// by its inode (SIOCGSKNS).
func Listener(f *os.File, port int) (net.Listener, error) {
	fd := int(f.Fd())
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return nil, fmt.Errorf("%w: not a listening socket", ErrListener)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v != 0 {
		return nil, fmt.Errorf("%w: SO_REUSEPORT is set", ErrListener)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrListener, err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		if a.Addr != [4]byte{127, 0, 0, 1} || a.Port != port {
			return nil, fmt.Errorf("%w: it listens on %v:%d", ErrListener, net.IP(a.Addr[:]), a.Port)
		}
	case *unix.SockaddrInet6:
		if net.IP(a.Addr[:]).String() != "::1" || a.Port != port {
			return nil, fmt.Errorf("%w: it listens on [%v]:%d", ErrListener, net.IP(a.Addr[:]), a.Port)
		}
	default:
		return nil, fmt.Errorf("%w: not a TCP socket", ErrListener)
	}
	same, err := sameNetns(fd)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot tell its network namespace: %v", ErrListener, err)
	}
	if same {
		return nil, fmt.Errorf("%w: it listens in agentjail's own network namespace, not the jail's", ErrListener)
	}
	// The broker is woken for a connection once its client has spoken
	// (every client of the broker speaks first), not inside the client's
	// connect(2) and again for its request; a silent one takes no slot
	// until headerWait has gone by (docs/benchmarks.md). Should a kernel
	// refuse it, the broker serves as well, only woken once more.
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, int(headerWait/time.Second))
	return net.FileListener(f)
}

// sameNetns says whether socket fd lives in this process's network
// namespace.
func sameNetns(fd int) (bool, error) {
	own, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(own)
	theirs, err1 := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	ours, err2 := unix.GetsockoptUint64(own, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err1 == nil && err2 == nil {
		return theirs == ours, nil
	}
	ns, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return false, err
	}
	defer unix.Close(ns)
	var a, b unix.Stat_t
	if err := unix.Fstat(ns, &a); err != nil {
		return false, err
	}
	if err := unix.Stat("/proc/self/ns/net", &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// Command reader downloads through agentjail's broker with recvfrom(2)
// on a socket of its own (Go's net package hides how it reads): it asks
// for a CONNECT tunnel to HOST:PORT, reads it to the end, and prints
// NAME=<sha256 of what it read>. How it reads:
//   - block: a blocking socket, each read waiting in the kernel;
//   - waitall: the same, each read asking for MSG_WAITALL (its whole
//     buffer, unless a signal or the end comes first: a short read is
//     TCP's own behaviour too);
//   - poll: a non-blocking socket, poll(2) before each read, as curl does.
//
// Any read that fails is an error, EAGAIN on the blocking socket too: the
// jail's reads must mean what they meant before the broker moved the
// tunnel onto its kernel path.
//
//	reader NAME HOST:PORT block|waitall|poll
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		os.Exit(1)
	}
}

const usage = "usage: reader NAME HOST:PORT block|waitall|poll"

func run(args []string) error {
	if len(args) != 3 {
		return errors.New(usage)
	}
	flags, poll := 0, false
	switch args[2] {
	case "block":
	case "waitall":
		flags = unix.MSG_WAITALL
	case "poll":
		poll = true
	default:
		return errors.New(usage)
	}
	proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddrPort(proxy.Host)
	if err != nil {
		return fmt.Errorf("HTTPS_PROXY %q: %w", proxy, err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: addr.Addr().As4(), Port: int(addr.Port())}); err != nil {
		return err
	}
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", args[1])
	if _, err := unix.Write(fd, []byte(req)); err != nil {
		return err
	}
	// The reply's head, a byte at a time: nothing of the tunnel is read.
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		b := make([]byte, 1)
		if n, err := unix.Read(fd, b); n != 1 {
			return fmt.Errorf("the CONNECT reply: %q: %v", head, err)
		}
		head = append(head, b[0])
	}
	if !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		return fmt.Errorf("the CONNECT reply: %q", head)
	}
	if poll {
		if err := unix.SetNonblock(fd, true); err != nil {
			return err
		}
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		n, _, err := unix.Recvfrom(fd, buf, flags)
		if err == unix.EINTR {
			continue
		}
		if poll && err == unix.EAGAIN {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(p, -1); err != nil && err != unix.EINTR {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		h.Write(buf[:n])
	}
	fmt.Printf("%s=%x\n", args[0], h.Sum(nil))
	return nil
}

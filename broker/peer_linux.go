package broker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Caps on the search for a connection's other end: a jail with many
// processes, descriptors or sockets makes it give up, not take long.
const (
	peerMaxFDs   = 4096    // descriptors looked at, in all
	peerMaxTable = 4 << 20 // bytes of /proc/PID/net/tcp read
)

// errNoPeer: the search for the jail's end of a connection found nothing
// it may take (the connection is relayed instead).
var errNoPeer = errors.New("the jail's end of the connection was not found")

// holder is where a jail socket was found: a process (by pidfd) and its
// descriptor number. The broker keeps no descriptor of the socket itself
// (that would keep it open after the jail closed it, and keep back the
// FIN the tunnel ends by); it takes one for each look.
type holder struct {
	pidfd, n int
	inode    uint64
	mine     int // the broker's end, to search again from
}

// peerSocket finds the socket at the other end of mine,
// a connection the broker accepted in the jail's network namespace (the
// jail process's own socket), and returns a descriptor of it and where it
// is held. It is found by its inode, in the namespace's
// TCP table, then among the descriptors of the processes in that
// namespace (newest first), and taken with pidfd_getfd(2); what comes
// back is checked to be that very socket, so that a process that swaps
// its descriptors meanwhile gets nothing taken but its own socket.
func peerSocket(mine int) (int, *holder, error) {
	ns, err := unix.IoctlRetInt(mine, unix.SIOCGSKNS)
	if err != nil {
		return -1, nil, fmt.Errorf("its network namespace: %w", err)
	}
	var nst unix.Stat_t
	err = unix.Fstat(ns, &nst)
	unix.Close(ns)
	if err != nil {
		return -1, nil, err
	}
	local, err1 := unix.Getsockname(mine)
	remote, err2 := unix.Getpeername(mine)
	if err := errors.Join(err1, err2); err != nil {
		return -1, nil, err
	}
	pids := nsPids(nst)
	if len(pids) == 0 {
		return -1, nil, errNoPeer
	}
	// The jail's socket is local=remote, remote=local in the table.
	inode, err := socketInode(pids[0], remote, local)
	if err != nil {
		return -1, nil, err
	}
	target := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	budget := peerMaxFDs
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if budget--; budget < 0 {
				return -1, nil, errNoPeer
			}
			if l, err := os.Readlink(dir + "/" + e.Name()); err != nil || l != target {
				continue
			}
			n, _ := strconv.Atoi(e.Name())
			pidfd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			h := &holder{pidfd: pidfd, n: n, inode: inode, mine: mine}
			if fd, err := h.take(); err == nil {
				return fd, h, nil
			}
			unix.Close(pidfd)
		}
	}
	return -1, nil, errNoPeer
}

// queued is how much the jail's socket holds unread, found where it was
// last held, or where it is held now; errNoPeer when no process of the
// jail's holds it any more.
func (h *holder) queued() (int, error) {
	fd, err := h.take()
	if err != nil {
		fd, err = h.search()
		if err != nil {
			return 0, err
		}
	}
	defer unix.Close(fd)
	return unix.IoctlGetInt(fd, unix.SIOCINQ)
}

// search looks for the socket again (its holder closed its descriptor or
// ended; another process may hold it).
func (h *holder) search() (int, error) {
	fd, again, err := peerSocket(h.mine)
	if err != nil {
		return -1, err
	}
	if again.inode != h.inode { // not this tunnel's socket: it was closed
		unix.Close(fd)
		unix.Close(again.pidfd)
		return -1, errNoPeer
	}
	unix.Close(h.pidfd)
	*h = *again
	return fd, nil
}

func (h *holder) close() { unix.Close(h.pidfd) }

// nsPids are the processes whose network namespace is ns, newest (the
// highest pid) first.
func nsPids(ns unix.Stat_t) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	slices.Reverse(pids)
	return pids
}

// socketInode finds, in the TCP table of pid's network namespace, the
// inode of the socket bound to local and connected to remote.
func socketInode(pid int, local, remote unix.Sockaddr) (uint64, error) {
	file, want := "tcp", procAddr(local)+" "+procAddr(remote)
	if _, ok := local.(*unix.SockaddrInet6); ok {
		file = "tcp6"
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/" + file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, peerMaxTable))
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) > 9 && fs[1]+" "+fs[2] == want && fs[3] == "01" { // ESTABLISHED
			if ino, err := strconv.ParseUint(fs[9], 10, 64); err == nil && ino != 0 {
				return ino, nil
			}
		}
	}
	return 0, errNoPeer
}

// procAddr writes sa as /proc/net/tcp does: each 32-bit word of the
// address in host order, in hex, then the port.
func procAddr(sa unix.Sockaddr) string {
	var addr []byte
	var port int
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		addr, port = a.Addr[:], a.Port
	case *unix.SockaddrInet6:
		addr, port = a.Addr[:], a.Port
	}
	var b strings.Builder
	for i := 0; i+4 <= len(addr); i += 4 {
		fmt.Fprintf(&b, "%02X%02X%02X%02X", addr[i+3], addr[i+2], addr[i+1], addr[i])
	}
	fmt.Fprintf(&b, ":%04X", port)
	return b.String()
}

// take takes the holder's descriptor and keeps it only if it is the
// socket.
func (h *holder) take() (int, error) {
	fd, err := unix.PidfdGetfd(h.pidfd, h.n, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Ino != h.inode {
		unix.Close(fd)
		return -1, errNoPeer
	}
	return fd, nil // close-on-exec: pidfd_getfd sets it
}

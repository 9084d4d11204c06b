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
	"unsafe"

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

// tunnelEnd is the broker's end of a connection from the jail, as the
// search for the jail's end needs it. It is taken once, while the
// connection is open: the search runs in the background, and the
// descriptor's number may be another socket's by the time it looks.
type tunnelEnd struct {
	ns            unix.Stat_t // the jail's network namespace
	local, remote unix.Sockaddr
}

func endOf(mine int) (tunnelEnd, error) {
	ns, err := unix.IoctlRetInt(mine, unix.SIOCGSKNS)
	if err != nil {
		return tunnelEnd{}, fmt.Errorf("its network namespace: %w", err)
	}
	var e tunnelEnd
	err = unix.Fstat(ns, &e.ns)
	unix.Close(ns)
	var err1, err2 error
	e.local, err1 = unix.Getsockname(mine)
	e.remote, err2 = unix.Getpeername(mine)
	return e, errors.Join(err, err1, err2)
}

// holder is where a jail socket was found: a process (by pidfd) and its
// descriptor number. The broker keeps no descriptor of the socket itself
// (that would keep it open after the jail closed it, and keep back the
// FIN the tunnel ends by); it takes one for each look.
type holder struct {
	pidfd, n int
	inode    uint64
	end      tunnelEnd // to search again from
}

// peerSocket finds the jail's end of the connection whose broker end is
// e (the jail process's own socket), and returns a descriptor of it and
// where it is held. It is found by its inode, in the namespace's TCP
// table, then among the descriptors of the processes in that namespace
// (newest first), each looked at through its /proc directory opened
// once (a pid reused meanwhile is not looked at), and taken with
// pidfd_getfd(2); what comes back is checked to be that very socket, so
// that a process that swaps its descriptors meanwhile gets nothing taken
// but its own socket.
func peerSocket(e tunnelEnd) (int, *holder, error) {
	procs := nsProcs(e.ns)
	defer closeProcs(procs)
	if len(procs) == 0 {
		return -1, nil, errNoPeer
	}
	// The jail's socket is local=remote, remote=local in the table.
	inode, err := socketInode(procs[0].dir, e.remote, e.local)
	if err != nil {
		return -1, nil, err
	}
	target := socketLink(inode)
	budget := peerMaxFDs
	for _, p := range procs {
		names, _ := dirNames(p.dir, "fd", budget+1)
		for _, name := range names {
			if budget--; budget < 0 {
				return -1, nil, errNoPeer
			}
			if l, err := readlinkat(p.dir, "fd/"+name); err != nil || l != target {
				continue
			}
			n, _ := strconv.Atoi(name)
			pidfd, err := unix.PidfdOpen(p.pid, 0)
			if err != nil {
				continue
			}
			h := &holder{pidfd: pidfd, n: n, inode: inode, end: e}
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
	fd, again, err := peerSocket(h.end)
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

// readsDiffer reports whether the jail's reads of its socket could behave
// otherwise once it is in the map, and the tunnel must stay relayed: the
// socket is in blocking mode, or its low-water mark is above a byte. fd is
// the broker's descriptor of the socket (the jail's own open file, whose
// O_NONBLOCK it shows). On a socket in the map the kernel's receive
// (tcp_bpf_recvmsg) waits once and returns EAGAIN when a wake-up brought
// no data (a signal's, say), which a blocking read never returns: seen
// here, testdata/reader failed so in 1 run of 8. A read already waiting
// in TCP's own receive when the socket joins would also never see a
// redirected byte. Readers that poll (curl, Go, Node, Python with a
// timeout) use non-blocking sockets, which take the path. Any doubt
// answers yes: a relayed tunnel is always correct.
func readsDiffer(fd int) bool {
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		return true
	}
	low, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT)
	return err != nil || low > 1
}

// socketLink is what a descriptor of the socket with this inode reads as
// (/proc/PID/fd/N).
func socketLink(inode uint64) string { return "socket:[" + strconv.FormatUint(inode, 10) + "]" }

// proc is a process of the jail's, by its /proc directory.
type proc struct{ pid, dir int }

// nsProcs opens the /proc directories of the processes whose network
// namespace is ns, newest (the highest pid) first.
func nsProcs(ns unix.Stat_t) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var procs []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir, err := unix.Open("/proc/"+e.Name(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dir, "ns/net", &st, 0) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			procs = append(procs, proc{pid, dir})
		} else {
			unix.Close(dir)
		}
	}
	slices.SortFunc(procs, func(a, b proc) int { return b.pid - a.pid })
	return procs
}

// closeProcs closes what nsProcs opened.
func closeProcs(procs []proc) {
	for _, p := range procs {
		unix.Close(p.dir)
	}
}

// dirNames are at most max of the names in the directory name of the
// process at dir ("fd": its descriptor numbers).
func dirNames(dir int, name string, max int) ([]string, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	names, err := f.Readdirnames(max)
	if err == io.EOF {
		err = nil
	}
	return names, err
}

func readlinkat(dir int, path string) (string, error) {
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(dir, path, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// socketInode finds, in the TCP table of the network namespace of the
// process at dir, the inode of the socket bound to local and connected to
// remote.
func socketInode(dir int, local, remote unix.Sockaddr) (uint64, error) {
	file, want := "net/tcp", procAddr(local)+" "+procAddr(remote)
	if _, ok := local.(*unix.SockaddrInet6); ok {
		file = "net/tcp6"
	}
	fd, err := unix.Openat(dir, file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), file)
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
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		addr = a.Addr[:]
	case *unix.SockaddrInet6:
		addr = a.Addr[:]
	}
	var b strings.Builder
	for i := 0; i+4 <= len(addr); i += 4 {
		fmt.Fprintf(&b, "%02X%02X%02X%02X", addr[i+3], addr[i+2], addr[i+1], addr[i])
	}
	fmt.Fprintf(&b, ":%04X", sockPort(sa))
	return b.String()
}

// SO_MEMINFO's array (linux/sock_diag.h): its length, and the receive
// memory's index.
const (
	skMeminfoVars      = 9
	skMeminfoRmemAlloc = 0
)

// rmemAlloc is a socket's receive memory in use (SO_MEMINFO's
// SK_MEMINFO_RMEM_ALLOC): not a count of bytes but what holds them, and
// zero only when nothing is left unread in TCP's queue.
func rmemAlloc(fd int) (uint32, error) {
	var info [skMeminfoVars]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return 0, e
	}
	return info[skMeminfoRmemAlloc], nil
}

// sockPort is sa's port; 0 for a socket that is not TCP/IP.
func sockPort(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
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

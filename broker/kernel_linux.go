package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel path: the download half of a tunnel, written by the broker
// straight into the receive queue of the jail's socket.
//
// Relayed, a tunnel's bytes cross loopback TCP twice (upstream → broker,
// broker → jail), and the second crossing costs the host about what the
// first does. With the jail's end of the broker's connection in a
// sockhash, and an SK_MSG program that runs on the broker's writes to its
// own end, the kernel moves what the broker writes onto the jail socket's
// ingress queue (bpf_msg_redirect_hash with BPF_F_INGRESS): no second TCP
// crossing, nothing for the jail's side to acknowledge. The redirect is
// synchronous: a write waits for room in the jail socket's buffer, and
// what the broker writes after it (its FIN, by TCP) is read after it.
//
// The program looks its target up by the writer's ports, which only the
// broker's sockets in the map have as their key; the jail's socket, a
// value in the map, writes through the program too, finds nothing under
// its ports and passes (its bytes go by TCP, as before). Needs CAP_BPF or
// CAP_SYS_ADMIN (and CAP_NET_ADMIN for the program): where agentjail
// lacks them, tunnels relay as before.
//
// Why no library: four bpf(2) commands and a twelve-instruction program;
// an eBPF library would be linked into every launch of agentjail for it.
type kernelPath struct {
	m int         // the sockhash: jail end (by the broker's ports) → jail socket
	q kernelQueue // how much a jail socket may hold unread
}

// bpf(2) commands, and what x/sys/unix does not name.
const (
	bpfMapCreate        = 0
	bpfProgLoad         = 5
	funcMsgRedirectHash = 71 // bpf_msg_redirect_hash
	skPass              = 1
	kernelEntries       = 2 * DefaultMaxConns
)

// struct sk_msg_md's offsets: the peer's address and port (network order;
// the kernel loads the port into the upper half on little-endian hosts),
// the local port (host order) and the family.
const (
	mdFamily     = 16
	mdRemoteIP4  = 20
	mdRemotePort = 60
	mdLocalPort  = 64
)

type bpfInsn struct {
	code uint8
	regs uint8 // dst in the low nibble, src in the high
	off  int16
	imm  int32
}

// key is the map's key: what the program reads off the writing socket.
// The broker's own entry has a key no socket has (family ^0).
type key struct {
	remoteIP4, remotePort, localPort, family uint32
}

// program is the SK_MSG verdict: bpf_msg_redirect_hash(msg, map, &key,
// BPF_F_INGRESS), then SK_PASS whatever it found (a redirect that found
// its target is a redirect, one that did not is a plain send).
func program(m int) []bpfInsn {
	const r1, r2, r3, r4, r10 = 1, 2, 3, 4, 10
	load := func(off int16) bpfInsn { return bpfInsn{0x61, r2 | r1<<4, off, 0} }   // r2 = *(u32 *)(r1 + off)
	store := func(off int16) bpfInsn { return bpfInsn{0x63, r10 | r2<<4, off, 0} } // *(u32 *)(r10 + off) = r2
	return []bpfInsn{
		load(mdRemoteIP4), store(-16),
		load(mdRemotePort), store(-12),
		load(mdLocalPort), store(-8),
		load(mdFamily), store(-4),
		{0x18, r2 | unix.BPF_PSEUDO_MAP_FD<<4, 0, int32(m)}, {0, 0, 0, 0}, // r2 = map
		{0xbf, r3 | r10<<4, 0, 0},         // r3 = r10
		{0x07, r3, 0, -16},                // r3 += -16
		{0xb7, r4, 0, unix.BPF_F_INGRESS}, // r4 = BPF_F_INGRESS
		{0x85, 0, 0, funcMsgRedirectHash}, // call
		{0xb7, 0, 0, skPass},              // r0 = SK_PASS
		{0x95, 0, 0, 0},                   // exit
	}
}

func bpf(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// newKernelPath makes the sockhash and attaches the program to it.
func newKernelPath() (*kernelPath, error) {
	mattr := struct{ typ, keySize, valueSize, maxEntries, flags uint32 }{
		unix.BPF_MAP_TYPE_SOCKHASH, uint32(unsafe.Sizeof(key{})), 4, kernelEntries, 0}
	m, err := bpf(bpfMapCreate, unsafe.Pointer(&mattr), unsafe.Sizeof(mattr))
	if err != nil {
		return nil, fmt.Errorf("a sockhash: %w", err)
	}
	insns := program(m)
	license := []byte("GPL\x00")
	log := make([]byte, 4096)
	pattr := struct {
		typ, insnCnt      uint32
		insns, license    uint64
		logLevel, logSize uint32
		logBuf            uint64
		kernVersion       uint32
		progFlags         uint32
	}{
		typ: unix.BPF_PROG_TYPE_SK_MSG, insnCnt: uint32(len(insns)),
		insns:    uint64(uintptr(unsafe.Pointer(&insns[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1, logSize: uint32(len(log)), logBuf: uint64(uintptr(unsafe.Pointer(&log[0]))),
	}
	p, err := bpf(bpfProgLoad, unsafe.Pointer(&pattr), unsafe.Sizeof(pattr))
	runtime.KeepAlive(insns)
	runtime.KeepAlive(license)
	runtime.KeepAlive(log)
	if err != nil {
		unix.Close(m)
		if n := unix.ByteSliceToString(log); n != "" {
			return nil, fmt.Errorf("the SK_MSG program: %w: %s", err, n)
		}
		return nil, fmt.Errorf("the SK_MSG program: %w", err)
	}
	defer unix.Close(p) // the map holds it once attached
	aattr := struct{ target, prog, typ, flags uint32 }{uint32(m), uint32(p), unix.BPF_SK_MSG_VERDICT, 0}
	if _, err := bpf(unix.BPF_PROG_ATTACH, unsafe.Pointer(&aattr), unsafe.Sizeof(aattr)); err != nil {
		unix.Close(m)
		return nil, fmt.Errorf("attaching the SK_MSG program: %w", err)
	}
	k := &kernelPath{m: m, q: hostQueue("/proc")}
	if err := k.selfTest(); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// selfTestSize is what selfTest redirects.
const selfTestSize = 64 << 10

// selfTest moves selfTestSize bytes between two loopback sockets of the
// broker's own, as a tunnel's download would go, and checks that they
// were redirected (TCP carried none), that poll(2) shows the receiving
// socket readable (the readers that take the path poll), that SIOCINQ
// counts them while unread (the broker's flow control reads it: on a
// kernel where it did not, a jail that stopped reading would have the
// whole stream queued in the host's memory), and that they arrive as
// sent. A kernel that fails any of it, or a host where the loopback
// cannot be used, gets no kernel path.
func (k *kernelPath) selfTest() error { return k.try(true) }

// try is selfTest; without redirect the broker's end is left out of the
// map, which must fail (TestKernelPathSelfTest).
func (k *kernelPath) try(redirect bool) error {
	failed := func(what string, err error) error {
		if err == nil {
			return fmt.Errorf("its self-test: %s", what)
		}
		return fmt.Errorf("its self-test: %s: %w", what, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return failed("a loopback listener", err)
	}
	defer ln.Close()
	sender, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return failed("a loopback connection", err)
	}
	defer sender.Close()
	receiver, err := ln.Accept()
	if err != nil {
		return failed("a loopback connection", err)
	}
	defer receiver.Close()
	if receiver.RemoteAddr().String() != sender.LocalAddr().String() {
		return failed("a loopback connection", fmt.Errorf("another came first, from %s", receiver.RemoteAddr()))
	}
	deadline := time.Now().Add(time.Second)
	sender.SetDeadline(deadline)
	receiver.SetDeadline(deadline)
	mine, peer := sysFD(sender), sysFD(receiver)
	end, err := endOf(mine)
	if err != nil {
		return failed("the sender's addresses", err)
	}
	if err := k.admit(end, peer); err != nil {
		return failed("the sockhash", err)
	}
	if redirect {
		if err := k.redirect(mine); err != nil {
			return failed("the sockhash", err)
		}
	}
	sent := make([]byte, selfTestSize)
	for i := range sent {
		sent[i] = byte(i * 7)
	}
	if _, err := sender.Write(sent); err != nil {
		return failed("a write", err)
	}
	// The redirect is done when the write returns.
	if info, err := unix.GetsockoptTCPInfo(mine, unix.IPPROTO_TCP, unix.TCP_INFO); err != nil || info.Bytes_sent != 0 {
		return failed("the bytes were not redirected", err)
	}
	p := []unix.PollFd{{Fd: int32(peer), Events: unix.POLLIN}}
	if n, err := unix.Poll(p, 0); n != 1 || p[0].Revents&unix.POLLIN == 0 {
		return failed("poll does not show the redirected bytes", err)
	}
	if n, err := unix.IoctlGetInt(peer, unix.SIOCINQ); err != nil || n != selfTestSize {
		return fmt.Errorf("this kernel's SIOCINQ does not count redirected bytes (%d of %d: %v), which the broker's flow control needs", n, selfTestSize, err)
	}
	got := make([]byte, selfTestSize)
	if _, err := io.ReadFull(receiver, got); err != nil || !bytes.Equal(got, sent) {
		return failed("the redirected bytes did not arrive as sent", err)
	}
	return nil
}

// refusedHere says why this host must not have the kernel path, or "".
// A host set to panic on a kernel warning (kernel.panic_on_warn) does not
// get it: the sockmap code it makes reachable from the jail has had
// warnings of its own (this project's test host, Linux 6.18, logged one
// from sk_psock_destroy during the path's work), and there a warning the
// jail could provoke would take the host down. When the setting cannot be
// read, the answer is no too: a relayed tunnel is always correct.
func refusedHere(procRoot string) string {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/panic_on_warn"))
	switch {
	case err != nil:
		return fmt.Sprintf("kernel.panic_on_warn cannot be read: %v", err)
	case strings.TrimSpace(string(b)) != "0":
		return "the host panics on a kernel warning (kernel.panic_on_warn)"
	}
	return ""
}

func (k *kernelPath) update(key key, fd int) error {
	v := uint32(fd)
	attr := struct {
		m, _              uint32
		key, value, flags uint64
	}{m: uint32(k.m), key: uint64(uintptr(unsafe.Pointer(&key))), value: uint64(uintptr(unsafe.Pointer(&v)))}
	_, err := bpf(unix.BPF_MAP_UPDATE_ELEM, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	runtime.KeepAlive(&key)
	runtime.KeepAlive(&v)
	return err
}

// redirectKey is the program's key for the broker's end e: what it reads
// off that socket when the broker writes on it. The jail's socket is
// stored under it.
func redirectKey(e tunnelEnd) key {
	k := key{
		remotePort: uint32(bits.ReverseBytes16(uint16(sockPort(e.remote)))) << 16,
		localPort:  uint32(sockPort(e.local)),
		family:     unix.AF_INET6,
	}
	if r, ok := e.remote.(*unix.SockaddrInet4); ok {
		k.family, k.remoteIP4 = unix.AF_INET, binary.NativeEndian.Uint32(r.Addr[:])
	}
	return k
}

// selfKey is the broker's end's own key, one no socket has: its socket
// cookie, under a family that does not exist.
func selfKey(cookie uint64) key { return key{uint32(cookie), uint32(cookie >> 32), 0, ^uint32(0)} }

// admit puts jail, the socket at the other end of the broker's end e, in
// the map: the kernel gives it the map's receive, which also reads what
// redirect will queue for it. Nothing is redirected yet: the broker's
// writes still go by TCP. A read of the jail's that was already waiting in
// TCP's own receive stays there (the kernel swaps the socket's operations,
// not a wait in progress), and would never see a redirected byte: the
// broker's next TCP bytes end that wait (copyDown).
func (k *kernelPath) admit(e tunnelEnd, jail int) error {
	if err := k.update(redirectKey(e), jail); err != nil {
		return fmt.Errorf("the jail's socket into the sockhash: %w", err)
	}
	return nil
}

// redirect puts mine, the broker's end, in the map: from now on what the
// broker writes on it lands in the receive queue of the jail's socket
// admitted for it. Neither is taken out: closing a socket takes it out,
// and taking the jail's out would drop what it has not read yet.
func (k *kernelPath) redirect(mine int) error {
	cookie, err := unix.GetsockoptUint64(mine, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return err
	}
	if err := k.update(selfKey(cookie), mine); err != nil {
		return fmt.Errorf("the broker's socket into the sockhash: %w", err)
	}
	return nil
}

func (k *kernelPath) close() { unix.Close(k.m) }

// The kernel's redirect knows no receive buffer, so the broker is the jail
// socket's flow control: it writes a chunk at a time, each once the socket
// holds at most the queue's limit less a chunk unread (SIOCINQ).
//
// The limit is what relaying could have held for the jail, and no more:
// the most TCP lets the jail socket's receive buffer and the broker's send
// buffer grow to in agentjail's network namespace (the maximum of
// net.ipv4.tcp_rmem and of tcp_wmem; a new network namespace starts with
// the first one's), between minQueue and maxQueue; a chunk is a quarter of
// it, at most maxChunk. The queue's pages are charged to the jail socket
// under TCP's memory limits (net.ipv4.tcp_mem), though not under its
// receive buffer. A deep queue is what lets a download's three busy
// processes (the server, the broker, the reader) each run for longer on a
// small host (docs/benchmarks.md).
type kernelQueue struct{ limit, chunk int }

const (
	minQueue = 5 << 20
	maxQueue = 32 << 20
	maxChunk = 4 << 20
)

// hostQueue is the queue for the TCP settings under procRoot (/proc).
func hostQueue(procRoot string) kernelQueue {
	limit := sysctlMax(filepath.Join(procRoot, "sys/net/ipv4/tcp_rmem")) + sysctlMax(filepath.Join(procRoot, "sys/net/ipv4/tcp_wmem"))
	limit = min(max(limit, minQueue), maxQueue)
	return kernelQueue{limit: limit, chunk: min(limit/4, maxChunk)}
}

// sysctlMax is the last of the numbers in the file at path (tcp_rmem's
// "min default max"), or 0 if it cannot be read.
func sysctlMax(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

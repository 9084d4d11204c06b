//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Return values of a seccomp program (include/uapi/linux/seccomp.h).
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000
	eperm_         = retErrno | uint32(unix.EPERM)
	enosys_        = retErrno | uint32(unix.ENOSYS)
)

// program is one compiled filter loaded into the BPF VM.
type program struct{ vm *bpf.VM }

func load(t testing.TB, f Filter) program {
	t.Helper()
	raw, err := Compile(f)
	if err != nil {
		t.Fatalf("compile %s: %v", f.Source, err)
	}
	if len(raw)%8 != 0 || len(raw) == 0 {
		t.Fatalf("BPF of %d bytes is not a whole number of sock_filter", len(raw))
	}
	// struct sock_filter { __u16 code; __u8 jt, jf; __u32 k; } in host order.
	ins := make([]bpf.RawInstruction, len(raw)/8)
	for i := range ins {
		b := raw[i*8:]
		ins[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	dec, ok := bpf.Disassemble(ins)
	if !ok {
		t.Fatalf("%s: the BPF VM cannot decode every instruction", f.Source)
	}
	vm, err := bpf.NewVM(dec)
	if err != nil {
		t.Fatalf("%s: %v", f.Source, err)
	}
	return program{vm}
}

// sc is one system call as seccomp sees it (struct seccomp_data).
type sc struct {
	arch uint32
	nr   int32
	args [6]uint64
}

// bytes lays out struct seccomp_data as the kernel does on a little-endian
// machine, 32-bit word by word. x/net/bpf loads words big-endian, so each
// word is written big-endian: a load at any offset then sees the value the
// kernel's load would.
func (c sc) bytes() []byte {
	words := []uint32{uint32(c.nr), c.arch, 0, 0}
	for _, a := range c.args {
		words = append(words, uint32(a), uint32(a>>32))
	}
	out := make([]byte, 4*len(words))
	for i, w := range words {
		binary.BigEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// verdict runs every program as the kernel does and keeps the answer of
// highest precedence: the smallest action, compared as signed 32-bit
// (kernel/seccomp.c, seccomp_run_filters).
func verdict(t testing.TB, progs []program, c sc) uint32 {
	t.Helper()
	best := uint32(retAllow)
	for _, p := range progs {
		got, err := p.vm.Run(c.bytes())
		if err != nil {
			t.Fatalf("BPF VM: %v", err)
		}
		r := uint32(got)
		if int32(r&0xffff0000) < int32(best&0xffff0000) {
			best = r
		}
	}
	return best
}

func nr(t testing.TB, name string) int32 {
	t.Helper()
	n, _, err := resolve(name)
	if err != nil || n < 0 {
		t.Fatalf("no native number for %s: %v", name, err)
	}
	return int32(n)
}

func nativeAudit(t testing.TB) uint32 {
	switch Native() {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	t.Skipf("no AUDIT_ARCH for %s in these tests", Native())
	return 0
}

// want is one row of a syscall table.
type want struct {
	name string
	args [6]uint64
	ret  uint32
}

func name(w want) string {
	if w.args == [6]uint64{} {
		return w.name
	}
	return fmt.Sprintf("%s(%#x, %#x)", w.name, w.args[0], w.args[1])
}

func check(t *testing.T, progs []program, table []want) {
	t.Helper()
	arch := nativeAudit(t)
	for _, w := range table {
		if got := verdict(t, progs, sc{arch: arch, nr: nr(t, w.name), args: w.args}); got != w.ret {
			t.Errorf("%s: got %#x, want %#x", name(w), got, w.ret)
		}
	}
}

func rows(ret uint32, names ...string) []want {
	var out []want
	for _, n := range names {
		out = append(out, want{name: n, ret: ret})
	}
	return out
}

// Written independently of builtin.go: what every profile must refuse.
var everyProfileDenies = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "open_by_handle_at", "iopl", "ioperm",
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// What an agent and its own sandbox need in every profile.
var everyProfileAllows = []string{
	"read", "write", "openat", "close", "execve", "execveat", "mmap", "mprotect", "brk",
	"getpid", "kill", "wait4", "socket", "connect", "prctl", "seccomp", "memfd_create",
	"mkdir", "chroot", "sethostname", "capset", "setresuid", "landlock_create_ruleset",
	"statmount", "listmount", "mseal", "file_getattr", "pidfd_open", "fsconfig",
}

// Must stay allowed in free profiles: what an inner sandbox needs.
var innerSandboxNeeds = []string{
	"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "setns",
	"open_tree", "open_tree_attr", "move_mount", "fsopen", "fsmount", "fspick", "mount_setattr",
}

const (
	sigchld = uint64(unix.SIGCHLD)
	nsAll   = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
)

func argTable(sealed bool) []want {
	deny := func(name string, a0, a1 uint64) want { return want{name, [6]uint64{a0, a1}, eperm_} }
	allow := func(name string, a0, a1 uint64) want { return want{name, [6]uint64{a0, a1}, retAllow} }
	t := []want{
		deny("ioctl", 0, unix.TIOCSTI),
		deny("ioctl", 1, 0x123<<32|unix.TIOCSTI), // CVE-2019-10063
		deny("ioctl", 0, unix.TIOCLINUX),
		deny("ioctl", 0, 0xffffffff<<32|unix.TIOCLINUX),
		deny("ioctl", 0, unix.TIOCSETD),
		deny("ioctl", 7, 0x1<<32|unix.TIOCSETD),
		allow("ioctl", 0, unix.TIOCGETD),
		allow("ioctl", 0, unix.TCSETS), // stty: the modes are restored after the run
		allow("ioctl", 0, unix.TCGETS),
		allow("ioctl", 0, unix.TIOCGWINSZ),
		allow("ioctl", 0, 0x541b),           // FIONREAD
		allow("ioctl", 0, unix.TIOCSTI<<32), // the kernel sees request 0
		allow("personality", 0, 0),
		allow("personality", 0x8, 0),
		allow("personality", 0x20000, 0),
		allow("personality", 0x20008, 0),
		allow("personality", 0xffffffff, 0),
		allow("personality", 0x1_00000008, 0), // the kernel takes the low 32 bits
		deny("personality", 0x40000, 0),       // ADDR_NO_RANDOMIZE
		deny("personality", 0x400000, 0),      // READ_IMPLIES_EXEC
		deny("personality", 0x1, 0),
		deny("personality", 0xc, 0),
		deny("personality", 0x2000c, 0),
		deny("personality", 0x30008, 0),
		deny("personality", 0xfffffffe, 0),
		deny("personality", 0x7fffffff, 0),
		deny("personality", 0xff_00040000, 0),
		// No set-user-id bit, by chmod or at creation; set-group-id
		// (git's shared repositories) and other modes pass.
		// (chmod, open, creat and mknod have the same rules; arm64 has
		// only the *at calls, so the table uses those.)
		deny("fchmod", 3, 0o4755),
		deny("fchmod", 3, 0o6755|0xffff<<32),
		deny("fchmod", 3, 0o4000),
		allow("fchmod", 3, 0o2775),
		allow("fchmod", 3, 0o1777),
		{"fchmodat", [6]uint64{0, 0, 0o4711}, eperm_},
		{"fchmodat", [6]uint64{0, 0, 0o2711}, retAllow},
		{"fchmodat2", [6]uint64{0, 0, 0o4711, unix.AT_SYMLINK_NOFOLLOW}, eperm_},
		{"openat", [6]uint64{0, 0, unix.O_CREAT | unix.O_WRONLY, 0o4755}, eperm_},
		{"openat", [6]uint64{0, 0, unix.O_CREAT | unix.O_WRONLY, 0o644}, retAllow},
		{"mknodat", [6]uint64{0, 0, unix.S_IFREG | 0o4755}, eperm_},
		{"mknodat", [6]uint64{0, 0, unix.S_IFREG | 0o644}, retAllow},
		allow("clone", sigchld, 0),
		allow("clone", threadFlags, 0),
		allow("unshare", unix.CLONE_FS|unix.CLONE_FILES, 0),
	}
	nsRet := uint32(retAllow)
	if sealed {
		nsRet = eperm_
	}
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		t = append(t,
			want{"clone", [6]uint64{flag | sigchld}, nsRet},
			want{"clone", [6]uint64{flag | 0xabc<<32}, nsRet},
			want{"unshare", [6]uint64{flag}, nsRet},
			want{"unshare", [6]uint64{flag | unix.CLONE_FS | 0x1<<40}, nsRet})
	}
	t = append(t,
		want{"unshare", [6]uint64{unix.CLONE_NEWTIME}, nsRet},
		want{"clone", [6]uint64{nsAll | sigchld}, nsRet},
		want{"unshare", [6]uint64{nsAll}, nsRet})
	return t
}

func TestBuiltinFree(t *testing.T) {
	t.Parallel()
	p := []program{load(t, Builtin(false))}
	check(t, p, rows(eperm_, everyProfileDenies...))
	check(t, p, rows(retAllow, everyProfileAllows...))
	check(t, p, rows(retAllow, innerSandboxNeeds...))
	check(t, p, argTable(false))
}

func TestBuiltinSealed(t *testing.T) {
	t.Parallel()
	p := []program{load(t, Builtin(true))}
	check(t, p, rows(eperm_, everyProfileDenies...))
	check(t, p, rows(retAllow, everyProfileAllows...))
	check(t, p, rows(eperm_, "setns", "mount", "umount2", "pivot_root",
		"open_tree", "open_tree_attr", "move_mount", "fsopen", "fsmount", "fspick", "mount_setattr"))
	check(t, p, []want{{name: "clone3", ret: enosys_}})
	check(t, p, argTable(true))
}

// TestPersonalityMatchesReference compares the personality rules with the
// rule they encode, on every one- and two-bit value, their complements, and
// random values with random upper halves.
func TestPersonalityMatchesReference(t *testing.T) {
	t.Parallel()
	p := []program{load(t, Builtin(false))}
	arch := nativeAudit(t)
	nrP := nr(t, "personality")
	allowed := map[uint32]bool{0: true, 0x8: true, 0x20000: true, 0x20008: true, 0xffffffff: true}
	var values []uint64
	for i := range 32 {
		for j := i; j < 32; j++ {
			v := uint64(1)<<i | uint64(1)<<j
			values = append(values, v, ^v&0xffffffff, v|0x20008, (^v&0xffffffff)|0x20008, v&^0x20008)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		values = append(values, r.Uint64(), r.Uint64()&0xffffffff|0x20008, uint64(r.Uint32()))
	}
	for _, v := range values {
		want := uint32(eperm_)
		if allowed[uint32(v)] {
			want = retAllow
		}
		if got := verdict(t, p, sc{arch: arch, nr: nrP, args: [6]uint64{v}}); got != want {
			t.Fatalf("personality(%#x): got %#x, want %#x", v, got, want)
		}
	}
}

// TestOtherArchitecturesAreKilled: i386 `int 0x80`, x32 and any foreign
// architecture are killed (the process, not just the thread).
func TestOtherArchitecturesAreKilled(t *testing.T) {
	t.Parallel()
	if Native() != "amd64" {
		t.Skip("the i386 and x32 rows are for amd64")
	}
	for _, sealed := range []bool{false, true} {
		p := []program{load(t, Builtin(sealed))}
		for _, c := range []sc{
			{arch: unix.AUDIT_ARCH_I386, nr: 20},                 // getpid via int 0x80
			{arch: unix.AUDIT_ARCH_I386, nr: 26},                 // ptrace
			{arch: unix.AUDIT_ARCH_X86_64, nr: 0x40000000 | 39},  // x32 getpid
			{arch: unix.AUDIT_ARCH_X86_64, nr: 0x40000000 | 101}, // x32 ptrace
			{arch: unix.AUDIT_ARCH_AARCH64, nr: 172},
		} {
			if got := verdict(t, p, c); got != retKillProcess {
				t.Errorf("sealed=%v arch %#x nr %#x: got %#x, want kill process", sealed, c.arch, c.nr, got)
			}
		}
	}
}

// TestNewSyscallsAgreeWithLibseccomp: where libseccomp knows a name of our
// table, the numbers match.
func TestNewSyscallsAgreeWithLibseccomp(t *testing.T) {
	t.Parallel()
	for name, n := range newSyscalls {
		got, byNumber, err := resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		if !byNumber && int(got) != n {
			t.Errorf("%s: libseccomp says %d, our table %d", name, got, n)
		}
	}
	for name, nums := range archSyscalls {
		got, byNumber, err := resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := nums[Native()]; !byNumber && (!ok || int(got) != n) {
			t.Errorf("%s: libseccomp says %d, our table %v", name, got, nums)
		}
	}
}

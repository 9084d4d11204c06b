package seccomp

import "golang.org/x/sys/unix"

// eperm is the answer of every built-in denial: the call fails as if a
// permission were missing, which programs handle; a kill would not be.
var eperm = Action{Kind: Errno, Errno: uint16(unix.EPERM)}

// denied are refused in every profile: the part of Docker's default
// profile that an agent never needs. Each is a way out of a jail or into
// the kernel's attack surface that namespaces do not cover.
var denied = []string{
	// Reading and writing other processes' memory.
	"ptrace", "process_vm_readv", "process_vm_writev",
	// The kernel keyring is not namespaced (keyrings(7)).
	"keyctl", "add_key", "request_key",
	// Kernel attack surface: eBPF, perf, userfaultfd (a race-widening
	// primitive in many exploits).
	"bpf", "perf_event_open", "userfaultfd",
	// Replacing or extending the kernel.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// open_by_handle_at escapes bind mounts ("shocker", CVE-2014-3519).
	"open_by_handle_at",
	// Raw I/O ports; swap, reboot, accounting, quotas.
	"iopl", "ioperm", "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
	// io_uring operations do not pass through seccomp at all, so a filter
	// that allowed io_uring_setup would allow everything io_uring can do.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// Terminal ioctls that push input into the terminal or act on a virtual
// console: with either, a jailed process could type commands into the
// operator's shell when they share a tty (CVE-2017-5226 for bwrap).
// TIOCSETD changes a terminal's line discipline: the operator's terminal
// left in another one after the run, and each line discipline is kernel
// code an unprivileged process can reach through any tty it opens, its
// own ptys included (n_gsm, CVE-2023-6546; n_hdlc, CVE-2017-2636); an
// agent never needs it (Docker's default profile does not refuse it).
const (
	tiocsti   = 0x5412
	tioclinux = 0x541c
	tiocsetd  = 0x5423
)

// modeArgs are the calls that set a file's mode or create a file with one,
// and which argument holds the mode. A set-user-id bit set in a writable
// root stays on the host file, where the jail's nosuid does not apply: a
// local user could run it as the run user (as root, from a sealed root
// agent) while the run lasts. Only S_ISUID is refused: S_ISGID on
// directories is what git's core.sharedRepository sets. What escapes the
// filter (openat2 passes its mode in memory) is stripped after the run
// (supervise.StripSetID), with set-group-id bits.
var modeArgs = []struct {
	name string
	arg  uint
}{
	{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
	{"open", 2}, {"openat", 3}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2},
}

// personalities are the personality(2) values Docker's default profile
// allows: PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and the
// query 0xffffffff. Anything else (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC,
// other ABIs) is refused.
var personalities = []uint64{0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Namespace flags of clone(2) and unshare(2).
var nsFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
}

// sealedDenied are refused in sealed profiles: joining namespaces and every
// way to mount, old API and new (fsopen(2) and friends; open_tree_attr is
// 467, past libseccomp 2.5.4's table).
var sealedDenied = []string{
	"setns", "mount", "umount", "umount2", "pivot_root",
	"open_tree", "open_tree_attr", "move_mount", "fsopen", "fsmount", "fspick", "mount_setattr",
}

// Builtin is the filter every profile applies unless seccomp.default is
// false. A free profile keeps what an inner sandbox needs (unshare,
// clone/clone3 with namespace flags, mount, umount2, pivot_root, setns); a
// sealed one refuses namespace creation and mounting.
func Builtin(sealed bool) Filter {
	f := Filter{Source: "built-in filter (inner_sandbox: free)", Default: Action{Kind: Allow}}
	if sealed {
		f.Source = "built-in filter (inner_sandbox: sealed)"
	}
	f.Rules = append(f.Rules, Rule{Syscalls: denied, Action: eperm, Origin: "denied"})
	// ioctl's request is an unsigned int (fs/ioctl.c): the kernel ignores
	// the upper 32 bits, so compare only the lower ones or
	// (0x123 << 32) | TIOCSTI slips past (CVE-2019-10063, flatpak).
	for _, req := range []uint64{tiocsti, tioclinux, tiocsetd} {
		f.Rules = append(f.Rules, Rule{Syscalls: []string{"ioctl"}, Action: eperm, Origin: "ioctl",
			Conds: []Cond{{Arg: 1, Op: MaskedEqual, Value: 0xffffffff, Datum: req}}})
	}
	f.Rules = append(f.Rules, personalityRules()...)
	for _, m := range modeArgs {
		f.Rules = append(f.Rules, bitRule(m.name, m.arg, unix.S_ISUID))
	}
	if sealed {
		for _, flag := range nsFlags {
			f.Rules = append(f.Rules, bitRule("clone", 0, flag))
		}
		for _, flag := range append(nsFlags, unix.CLONE_NEWTIME) {
			f.Rules = append(f.Rules, bitRule("unshare", 0, flag))
		}
		// clone3 passes its flags in memory, where seccomp cannot look.
		// ENOSYS, not EPERM: glibc and Go then fall back to clone(2),
		// whose flags the rules above check (Docker does the same).
		f.Rules = append(f.Rules, Rule{Syscalls: []string{"clone3"}, Action: Action{Kind: Errno, Errno: uint16(unix.ENOSYS)}, Origin: "clone3"})
		f.Rules = append(f.Rules, Rule{Syscalls: sealedDenied, Action: eperm, Origin: "sealed"})
	}
	return f
}

// bitRule refuses name when argument arg has bit set. CLONE_NEWTIME (0x80)
// is left out for clone(2), where the low byte is the exit signal.
func bitRule(name string, arg uint, bit uint64) Rule {
	return Rule{Syscalls: []string{name}, Action: eperm, Origin: name,
		Conds: []Cond{{Arg: arg, Op: MaskedEqual, Value: bit, Datum: bit}}}
}

// personalityRules refuse personality(2) unless the low 32 bits of its
// argument (the kernel takes an unsigned int, kernel/exec_domain.c) are one
// of the allowed personalities. libseccomp accepts one comparison per
// argument in a rule and refuses allow rules under an allow default, so the
// refusal is a union of single masked comparisons:
//
// Call F the bits outside 0x20008. A value is refused when it has a bit of
// F set and is not 0xffffffff. Start at a set F bit and walk up (cyclically)
// to the end of its run of ones; the run ends somewhere since the value is
// not all ones. If it ends at an F bit e, "e set, e+1 clear" matches. If it
// ends at bit 3 or 17, the run started at an F bit below it, so bit 2 (or
// 16) is set too: "2 and 3 set, 4 clear" (or "16 and 17 set, 18 clear")
// matches. None of these match an allowed value. The masks stay below
// 1<<32, so the upper half of the register is ignored, as the kernel does.
func personalityRules() []Rule {
	const allowedBits = 0x20008
	var rules []Rule
	add := func(mask, datum uint64) {
		rules = append(rules, Rule{Syscalls: []string{"personality"}, Action: eperm, Origin: "personality",
			Conds: []Cond{{Arg: 0, Op: MaskedEqual, Value: mask, Datum: datum}}})
	}
	for b := range 32 {
		bit, next := uint64(1)<<b, uint64(1)<<((b+1)%32)
		if bit&allowedBits != 0 {
			continue
		}
		add(bit|next, bit)
		if next&allowedBits != 0 { // b is 2 or 16
			nn := next << 1
			add(bit|next|nn, bit|next)
		}
	}
	return rules
}

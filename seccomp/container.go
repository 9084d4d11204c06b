package seccomp

import (
	"slices"

	"golang.org/x/sys/unix"
)

// dockerDenied are, beyond the built-in denials, the calls Docker's default
// profile refuses to a container holding Docker's default capabilities
// (its CAP_SYS_ADMIN, CAP_SYS_TIME, CAP_SYS_NICE, CAP_SYSLOG, ... entries),
// and the obsolete or unimplemented ones it never lists.
var dockerDenied = []string{
	// CAP_SYS_ADMIN: the new mount API, fanotify, names, syslog, joining
	// namespaces. (mount, umount2, pivot_root, unshare and clone are added
	// back below: agentjail needs them.)
	"fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "mount_setattr", "move_mount",
	"open_tree", "open_tree_attr", "setdomainname", "sethostname", "setns", "syslog", "umount",
	// CAP_SYS_PTRACE, CAP_SYS_TIME, CAP_SYS_TTY_CONFIG, CAP_SYS_NICE.
	"kcmp", "pidfd_getfd", "process_madvise",
	"settimeofday", "stime", "clock_settime", "clock_settime64",
	"vhangup",
	"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages",
	// Obsolete, unimplemented or never needed in a container.
	"uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "create_module", "get_kernel_syms",
	"query_module", "afs_syscall", "putpmsg", "getpmsg", "security", "tuxcall", "vserver",
	"vm86", "vm86old",
}

// containerNeeds is exactly what agentjail's bubblewrap, and the agent's
// own bubblewrap inside it, need to build a jail without CAP_SYS_ADMIN:
// user and other namespaces (clone with namespace flags, unshare), and the
// mounts of the new root (mount, umount2, pivot_root). Docker's default
// profile refuses all five to a container without CAP_SYS_ADMIN.
var containerNeeds = []string{"clone", "unshare", "mount", "umount2", "pivot_root"}

// ForContainer is a profile for the container that runs agentjail: an
// allowlist in the shape of Docker's default profile (unknown calls fail
// with EPERM) holding every call of known, minus Docker's default denials
// and the built-in ones, plus containerNeeds. known is KnownSyscalls of the
// architectures the profile is for.
func ForContainer(known []string) Filter {
	special := []string{"personality", "socket", "clone3"}
	var allow []string
	for _, name := range known {
		if !slices.Contains(denied, name) && !slices.Contains(dockerDenied, name) &&
			!slices.Contains(containerNeeds, name) && !slices.Contains(special, name) {
			allow = append(allow, name)
		}
	}
	f := Filter{
		Source:  "container profile",
		Default: eperm,
		Rules:   []Rule{{Syscalls: allow, Action: Action{Kind: Allow}, Origin: "allowed"}},
	}
	for _, p := range personalities {
		f.Rules = append(f.Rules, Rule{Syscalls: []string{"personality"}, Action: Action{Kind: Allow}, Origin: "personality",
			Conds: []Cond{{Arg: 0, Op: Equal, Value: p}}})
	}
	f.Rules = append(f.Rules,
		// AF_VSOCK reaches the hypervisor's host side.
		Rule{Syscalls: []string{"socket"}, Action: Action{Kind: Allow}, Origin: "socket",
			Conds: []Cond{{Arg: 0, Op: NotEqual, Value: unix.AF_VSOCK}}},
		// clone3's flags are out of seccomp's sight; ENOSYS makes callers
		// fall back to clone(2), as Docker's profile does.
		Rule{Syscalls: []string{"clone3"}, Action: Action{Kind: Errno, Errno: uint16(unix.ENOSYS)}, Origin: "clone3"},
		Rule{Syscalls: containerNeeds, Action: Action{Kind: Allow}, Origin: "agentjail"},
	)
	return f
}

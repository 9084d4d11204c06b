package seccomp

// newSyscalls are system calls that libseccomp 2.5.4 (Debian 12) cannot
// name but kernels here have. Since 424 every architecture but alpha
// numbers new calls alike (scripts/syscall.tbl, "common"), so one number
// serves amd64 and arm64. Compile uses this table only for names libseccomp
// does not know; a test checks that the two agree where both know a name.
// 447 to 456 are known to Debian's patched 2.5.4 (deb12u1) but not to every
// libseccomp 2.5; Docker's default profile allows them, so the container
// profile must be able to name them wherever it is exported.
var newSyscalls = map[string]int{
	"memfd_secret":      447,
	"process_mrelease":  448,
	"futex_waitv":       449,
	"cachestat":         451,
	"fchmodat2":         452,
	"map_shadow_stack":  453,
	"futex_wake":        454,
	"futex_wait":        455,
	"futex_requeue":     456,
	"statmount":         457,
	"listmount":         458,
	"lsm_get_self_attr": 459,
	"lsm_set_self_attr": 460,
	"lsm_list_modules":  461,
	"mseal":             462,
	"setxattrat":        463,
	"getxattrat":        464,
	"listxattrat":       465,
	"removexattrat":     466,
	"open_tree_attr":    467,
	"file_getattr":      468,
	"file_setattr":      469,
	"listns":            470,
}

// archSyscalls are calls only some architectures have, unknown to
// libseccomp 2.5.4, by number on each architecture that has one. Docker's
// default profile lists both, so it imports as is. A rule naming one
// governs the architectures that have it and is skipped on the others, as
// libseccomp skips its own names of other architectures.
var archSyscalls = map[string]map[Arch]int{
	"uretprobe":     {"amd64": 335},   // arch/x86/entry/syscalls/syscall_64.tbl
	"riscv_hwprobe": {"riscv64": 258}, // arch/riscv/include/uapi/asm/unistd.h
}

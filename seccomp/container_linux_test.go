//go:build linux && cgo

package seccomp

import (
	"encoding/json"
	"slices"
	"testing"

	docker "github.com/moby/profiles/seccomp"
	"golang.org/x/sys/unix"
)

func containerProgram(t *testing.T) []program {
	t.Helper()
	f, err := ForContainer()
	if err != nil {
		t.Fatal(err)
	}
	return []program{load(t, f)}
}

// TestContainerProfile: Docker's default denials stay; namespaces and the
// mounts of a new root are allowed, without CAP_SYS_ADMIN.
func TestContainerProfile(t *testing.T) {
	t.Parallel()
	p := containerProgram(t)
	check(t, p, rows(retAllow, "read", "execve", "mkdir", "chroot", "prctl", "seccomp", "capset", "setresuid",
		"clone", "unshare", "mount", "umount2", "pivot_root", "statmount", "name_to_handle_at"))
	check(t, p, rows(eperm_, everyProfileDenies...))
	check(t, p, rows(eperm_, "setns", "fsopen", "open_tree", "move_mount", "sethostname", "syslog",
		"settimeofday", "kcmp", "mbind", "vhangup", "open_tree_attr", "lsm_get_self_attr", "set_mempolicy_home_node"))
	check(t, p, []want{
		{"clone", [6]uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWNS | sigchld}, retAllow},
		{"clone3", [6]uint64{}, enosys_},
		{"socket", [6]uint64{unix.AF_INET}, retAllow},
		{"socket", [6]uint64{unix.AF_ALG}, eperm_},
		{"socket", [6]uint64{unix.AF_VSOCK}, eperm_},
		{"personality", [6]uint64{0}, retAllow},
		{"personality", [6]uint64{0x40000}, eperm_},
	})
	// A call no table knows yet gets the default, EPERM.
	if got := verdict(t, p, sc{arch: nativeAudit(t), nr: 1000}); got != eperm_ {
		t.Errorf("unknown syscall 1000: got %#x, want EPERM", got)
	}
}

// TestContainerProfileIsDockersPlusNeeds: syscall by syscall, with the
// arguments Docker's rules look at, the container profile answers as
// Docker's default profile does for a container with Docker's default
// capabilities, except that containerNeeds are allowed and the built-in
// denials refused.
func TestContainerProfileIsDockersPlusNeeds(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(docker.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Import("docker", data, Host{Arch: Native(), Caps: DockerCaps})
	if err != nil {
		t.Fatal(err)
	}
	ref.Arches = nil // the export governs the native architecture only
	docker := []program{load(t, ref)}
	ours := containerProgram(t)

	known, err := KnownSyscalls(Native())
	if err != nil {
		t.Fatal(err)
	}
	nsClone := uint64(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | sigchld)
	argSets := [][6]uint64{{}, {sigchld}, {nsClone}, {unix.AF_ALG}, {39}, {unix.AF_VSOCK}, {41}, {0x40000}, {0xffffffff}}
	compared := 0
	for _, name := range known {
		n, _, err := resolve(name)
		if err != nil || n < 0 {
			continue // another architecture's call
		}
		for _, args := range argSets {
			c := sc{arch: nativeAudit(t), nr: int32(n), args: args}
			got, want := verdict(t, ours, c), verdict(t, docker, c)
			compared++
			switch {
			case slices.Contains(containerNeeds, name):
				if got != retAllow {
					t.Errorf("%s%v: got %#x, want allow (containerNeeds)", name, args[:1], got)
				}
			case slices.Contains(denied, name):
				if got != eperm_ {
					t.Errorf("%s%v: got %#x, want EPERM (a built-in denial)", name, args[:1], got)
				}
			case got != want:
				t.Errorf("%s%v: got %#x, Docker's default profile answers %#x", name, args[:1], got, want)
			}
		}
	}
	if compared < 300*len(argSets) {
		t.Fatalf("compared only %d calls", compared)
	}
}

// sinceDocker20 are the calls Docker's default profile allows to every
// container today (github.com/moby/profiles/seccomp) that Debian 12's
// Docker 20.10.24 profile did not: new kernel calls (cachestat, fchmodat2,
// the futex2 calls, map_shadow_stack, mseal, statmount, listmount, the
// *xattrat calls, uretprobe, riscv_hwprobe), memory protection keys, and
// name_to_handle_at, which 20.10 allowed only with CAP_SYS_ADMIN.
var sinceDocker20 = []string{
	"cachestat", "fchmodat2", "futex_requeue", "futex_wait", "futex_wake", "map_shadow_stack", "mseal",
	"statmount", "listmount", "getxattrat", "setxattrat", "listxattrat", "removexattrat", "uretprobe", "riscv_hwprobe",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "name_to_handle_at",
}

// TestContainerProfileWithinDebiansDocker checks the container profile
// against an independent copy of Docker's default profile, the one Debian
// 12 ships (docker.io 20.10.24, fetched by .ci/profiles): every call it
// allows, on amd64 or arm64, is allowed there to a container with Docker's
// default capabilities, or is in containerNeeds or sinceDocker20.
func TestContainerProfileWithinDebiansDocker(t *testing.T) {
	t.Parallel()
	data := externalProfile(t, "docker-default.json")
	debian := map[string]bool{}
	for _, arch := range containerArches {
		f, err := Import("docker-default.json", data, Host{Arch: arch, Caps: DockerCaps})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Rules {
			if r.Action.Kind == Allow {
				for _, n := range r.Syscalls {
					debian[n] = true
				}
			}
		}
	}
	f, err := ForContainer()
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for _, r := range f.Rules {
		if r.Action.Kind != Allow {
			continue
		}
		for _, n := range r.Syscalls {
			allowed++
			if !debian[n] && !slices.Contains(containerNeeds, n) && !slices.Contains(sinceDocker20, n) {
				t.Errorf("%s is allowed, but neither by Debian's Docker profile, containerNeeds nor sinceDocker20", n)
			}
		}
	}
	// The list above holds only what the profile allows.
	for _, n := range sinceDocker20 {
		if debian[n] || !slices.ContainsFunc(f.Rules, func(r Rule) bool { return r.Action.Kind == Allow && slices.Contains(r.Syscalls, n) }) {
			t.Errorf("sinceDocker20 lists %s needlessly", n)
		}
	}
	if allowed < 300 {
		t.Fatalf("only %d calls allowed", allowed)
	}
}

package seccomp

import (
	"encoding/json"
	"fmt"
	"slices"

	docker "github.com/moby/profiles/seccomp"
)

// DockerCaps are the capabilities Docker gives a container by default
// (moby's oci/caps.DefaultCapabilities): no CAP_SYS_ADMIN, so Docker's
// default profile refuses namespaces and mounts.
var DockerCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// containerArches are the architectures one exported profile serves. Each
// resolves Docker's arch-conditional entries (arch_prctl and modify_ldt on
// amd64; arm's cache and TLS calls on arm64); a runtime skips the names its
// architecture lacks.
var containerArches = []Arch{"amd64", "arm64"}

// containerNeeds is exactly what agentjail's bubblewrap, and the agent's
// own sandbox inside it, need beyond Docker's default profile to build a
// jail without CAP_SYS_ADMIN. Docker's profile allows each only with
// CAP_SYS_ADMIN. What bwrap 0.8 calls (strace -f of `bwrap --unshare-all
// --ro-bind / / --proc /proc --dev /dev true`, and bubblewrap.c's
// setup_newroot):
//   - clone: one clone(2) with CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|
//     CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP creates the
//     sandbox; Docker's masked clone rule refuses every namespace flag.
//     clone3 keeps Docker's ENOSYS, so libc and Go fall back to clone(2),
//     whose flags a filter can see.
//   - unshare: bwrap --disable-userns calls unshare(CLONE_NEWUSER), and so
//     does the agent's `unshare -Ur` (inner_sandbox: free promises both).
//   - mount: every bind, tmpfs, proc and remount of the new root (42 calls
//     for the line above).
//   - pivot_root: into the new root, then "." onto "." to drop the old one.
//   - umount2: detaching the old root after each pivot_root (MNT_DETACH).
//
// Not needed, so left refused: setns (bwrap --userns joins an existing
// namespace; agentjail does not pass it), sethostname (agentjail passes
// no --hostname), the new mount API (bwrap 0.8 uses mount(2) only), umount
// (the single-argument call; bwrap uses umount2).
var containerNeeds = []string{"clone", "unshare", "mount", "umount2", "pivot_root"}

// ForContainer is a profile for the container that runs agentjail: Docker's
// default profile (github.com/moby/profiles/seccomp, the module Docker's
// engine takes its default from) resolved for Docker's default
// capabilities on amd64 and arm64, minus agentjail's built-in denials
// (what every jail refuses anyway), plus containerNeeds. Like Docker's, it refuses unknown calls with EPERM.
// Where Docker's answer changed between releases, the module's is taken:
// name_to_handle_at, for one, which Docker 20.10 (Debian 12's) allowed only
// with CAP_SYS_ADMIN, is allowed to every container since (its dangerous
// twin, open_by_handle_at, is a built-in denial).
//
// Docker's minKernel entries are left out (resolved for kernel 0.0): the
// only one, ptrace and process_vm_* on kernels ≥ 4.8, is in the built-in
// denials. Only the native architecture is governed: Docker's profile also
// allows the i386 and x32 ABIs on amd64 (and arm on arm64), which an agent
// never needs; without them in the profile the runtime kills their calls.
func ForContainer() (Filter, error) {
	data, err := json.Marshal(docker.DefaultProfile())
	if err != nil {
		return Filter{}, fmt.Errorf("docker's default seccomp profile: %w", err)
	}
	out := Filter{Source: "container profile"}
	drop := slices.Concat(denied, containerNeeds)
	for _, arch := range containerArches {
		f, err := Import("Docker's default seccomp profile", data, Host{Arch: arch, Caps: DockerCaps})
		if err != nil {
			return Filter{}, err
		}
		out.Default = f.Default
		for _, r := range f.Rules {
			r.Syscalls = slices.DeleteFunc(r.Syscalls, func(n string) bool { return slices.Contains(drop, n) })
			r.Origin = "docker"
			if len(r.Syscalls) > 0 && !slices.ContainsFunc(out.Rules, func(o Rule) bool { return sameRule(o, r) }) {
				out.Rules = append(out.Rules, r)
			}
		}
	}
	out.Rules = append(out.Rules, Rule{Syscalls: containerNeeds, Action: Action{Kind: Allow}, Origin: "agentjail"})
	return out, nil
}

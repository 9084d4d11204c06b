package doctor

import (
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/procs"
)

// Status is a check's verdict.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn" // worth knowing; nothing breaks
	Fail Status = "fail"
	Skip Status = "skip" // not probed: what it needs failed (the jail did not start)
)

// lastFixAt is where the fix of one of agentjail's own messages begins:
// its last "; " outside quotes ("...", '...', $'...', `...`: a path or a
// command may hold one), -1 for none or a message of several lines.
func lastFixAt(msg string) int {
	at := -1
	var quote byte // the quote open ('$' for $'...'), 0 for none
	for i := 0; i < len(msg); i++ {
		b := msg[i]
		switch {
		case b == '\n':
			return -1
		case quote == 0 && b == '\'' && i > 0 && msg[i-1] == '$':
			quote = '$'
		case quote == 0 && (b == '"' || b == '\'' || b == '`'):
			quote = b
		case quote == 0 && b == ';' && i+1 < len(msg) && msg[i+1] == ' ':
			at = i
		case (quote == '"' || quote == '$') && b == '\\':
			i++ // escaped
		case b == quote || quote == '$' && b == '\'':
			quote = 0
		}
	}
	if quote != 0 {
		return -1
	}
	return at
}

// skip makes c a check not probed because the jail did not start.
func (c *Check) skip() {
	c.Status, c.Detail = Skip, "not probed: the jail did not start (see jail)"
	c.Cause, c.Fix = "the jail itself does not start", "fix what the jail check names"
}

// Check is one verdict with its evidence, cause and fix (cause and fix are
// empty for a pass).
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Cause  string `json:"cause"`
	Fix    string `json:"fix"`
}

// Report is `agentjail doctor --json`, a stable contract described by
// SchemaJSON: fields and checks may be added, never renamed.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// SchemaJSON is the JSON Schema of Report.
//
//go:embed schema.json
var SchemaJSON []byte

// Check names, in the order doctor reports them.
const (
	CheckBwrap     = "bwrap"
	CheckUserns    = "userns-sysctls"
	CheckSeccomp   = "seccomp"
	CheckContainer = "container"
	CheckCgroup    = "cgroup-v2"
	CheckHostProc  = "host-proc"
	CheckJail      = "jail"
	CheckInnerUser = "inner-userns"
	CheckInnerProc = "inner-proc"
	CheckInnerNet  = "inner-netns"
	CheckNetwork   = "network"
	CheckClaude    = "claude-sandbox"
	CheckCodex     = "codex-sandbox"
	CheckInit      = "init"
)

// Diagnose turns the facts into the report.
func Diagnose(h Host, b bwrap.Info, bErr error, j Jail) Report {
	checks := []Check{
		bwrapCheck(b, bErr),
		usernsCheck(h),
		seccompCheck(h),
		containerCheck(h),
		cgroupCheck(h),
		hostProcCheck(h, j),
		jailCheck(h, j),
		networkCheck(j),
	}
	checks = append(checks, innerChecks(h, j)...)
	checks = append(checks, claudeCheck(j), codexCheck(j))
	checks = append(checks, initCheck(h))
	r := Report{OK: true, Checks: checks}
	for _, c := range checks {
		if c.Status == Fail {
			r.OK = false
		}
	}
	return r
}

func bwrapCheck(b bwrap.Info, err error) Check {
	c := Check{Name: CheckBwrap}
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Cause = "agentjail's outer layer is bubblewrap >= " + bwrap.Minimum.String() + " (0.8.0 brought --disable-userns)"
		c.Fix = bwrap.Install
		return c
	}
	c.Status = Pass
	c.Detail = fmt.Sprintf("bubblewrap %s at %s, not setuid", b.Version, b.Path)
	if b.Setuid {
		c.Status = Warn
		c.Detail = fmt.Sprintf("bubblewrap %s at %s, setuid root", b.Version, b.Path)
		c.Cause = "a setuid bwrap builds the jail with real root privileges instead of in a user namespace; agentjail is designed and tested with the unprivileged mode"
		c.Fix = "where unprivileged user namespaces are allowed, use a bwrap without the setuid bit (chmod u-s " + b.Path + ")"
	}
	return c
}

// apparmorFix is how Ubuntu's user-namespace restriction is lifted for
// agentjail without breaking the agent's own sandbox: Ubuntu's
// bwrap-userns-restrict stacks what bwrap runs with unpriv_bwrap, which has
// `audit deny capability`, so an inner bwrap could not build its namespaces.
const apparmorFix = "give /usr/bin/bwrap an unconfined-mode AppArmor profile with `userns,` (docs/apparmor.md; Ubuntu's bwrap-userns-restrict is not enough), or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"

func usernsCheck(h Host) Check {
	c := Check{Name: CheckUserns, Status: Pass}
	var vals []string
	for _, k := range UsernsSysctls {
		v, ok := h.Sysctls[k]
		if !ok {
			v = "absent"
		}
		vals = append(vals, k+"="+v)
	}
	c.Detail = strings.Join(vals, ", ")
	if h.UIDMap != "" && h.UIDMap != "0 0 4294967295" {
		c.Detail += "; agentjail itself runs inside a user namespace (uid_map " + strings.ReplaceAll(h.UIDMap, "\n", "; ") + ")"
	}
	switch {
	case h.Sysctls["kernel.unprivileged_userns_clone"] == "0":
		c.Status = Fail
		c.Cause = "kernel.unprivileged_userns_clone=0 (Debian's switch) forbids user namespaces to unprivileged users: agentjail's outer layer, run as the unprivileged run user, and the agent's own sandbox both need them"
		c.Fix = "sysctl -w kernel.unprivileged_userns_clone=1, and persist it in /etc/sysctl.d/"
	case h.Sysctls["user.max_user_namespaces"] == "0":
		c.Status = Fail
		c.Cause = "user.max_user_namespaces=0 forbids new user namespaces: agentjail's outer layer and the agent's own sandbox both need them"
		c.Fix = "sysctl -w user.max_user_namespaces=15000, and persist it in /etc/sysctl.d/"
	case h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] == "1":
		c.Status = Warn
		c.Cause = "AppArmor restricts unprivileged user namespaces (Ubuntu >= 23.10): a program without an AppArmor profile that allows them gets a namespace without capabilities, so it cannot write its uid map or bring up loopback; the probes below show whether bwrap and unshare are allowed here"
		c.Fix = "if they fail: " + apparmorFix
	}
	return c
}

func seccompCheck(h Host) Check {
	c := Check{Name: CheckSeccomp, Status: Pass}
	actions, hasActions := h.Sysctls["kernel.seccomp.actions_avail"]
	switch {
	case h.SeccompMode == "" || !hasActions || !slices.Contains(strings.Fields(actions), "errno"):
		c.Status = Fail
		c.Detail = "the kernel offers no seccomp filters (no Seccomp field in /proc/self/status, or no errno action in kernel.seccomp.actions_avail)"
		c.Cause = "the profiles' system-call filters need seccomp filter mode (CONFIG_SECCOMP_FILTER)"
		c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER (every mainstream distribution kernel is)"
	case h.SeccompMode != "0":
		c.Status = Warn
		c.Detail = "available (actions: " + actions + "); agentjail itself already runs under a seccomp filter (mode " + h.SeccompMode + ")"
		c.Cause = "a filter from outside (a container runtime's seccomp profile) stays under every filter agentjail adds; Docker's default refuses unshare and clone with namespace flags, which the agent's own sandbox needs; the probes below show whether this one does"
		c.Fix = "if they fail: run the container with --security-opt seccomp=FILE, FILE from `agentjail seccomp export --for-container`"
	default:
		c.Detail = "available (actions: " + actions + "); no filter on agentjail itself"
	}
	return c
}

func containerCheck(h Host) Check {
	c := Check{Name: CheckContainer, Status: Pass, Detail: "not in a container, as far as /.dockerenv, /run/.containerenv, a service-account token and pid 1's environment tell"}
	if h.Container != "" {
		c.Detail = "in a container: " + h.Container + "; its /proc masks and seccomp profile decide the probes below"
	}
	if h.AppArmor != "" && h.AppArmor != "unconfined" {
		c.Detail += "; confined by the AppArmor profile " + h.AppArmor
	}
	return c
}

func cgroupCheck(h Host) Check {
	c := Check{Name: CheckCgroup}
	mp, dir := cgroup2Mount(h), CgroupDir(h)
	ctrl := strings.Join(h.CgroupControllers, " ")
	if ctrl == "" {
		ctrl = "none"
	}
	writable := map[bool]string{true: "writable", false: "not writable"}[h.CgroupWritable]
	switch {
	case mp == "":
		c.Status = Warn
		c.Detail = "no cgroup v2 mounted"
		c.Cause = "a run cannot get a cgroup v2 of its own: no cgroup.kill (the pid namespace's teardown and the marker sweep still end every process); " + v1Limits(h)
		c.Fix = "mount cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command line, or mount -t cgroup2 none /sys/fs/cgroup)"
	case mp != "/sys/fs/cgroup":
		c.Status = Warn
		c.Detail = fmt.Sprintf("cgroup v2 only in hybrid mode at %s (%s %s; controllers: %s)", mp, dir, writable, ctrl)
		c.Cause = "in hybrid mode the resource controllers stay on cgroup v1: a run's cgroup v2 can be killed as a whole (cgroup.kill) where writable; " + v1Limits(h)
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1 for the unified layout"
		if !h.Root {
			c.Fix += ", or run agentjail as root, which may write the cgroup v1 controllers"
		}
	case !h.CgroupWritable:
		c.Status = Warn
		c.Detail = fmt.Sprintf("cgroup v2 at %s; this process's cgroup %s is not writable (controllers: %s)", mp, dir, ctrl)
		c.Cause = "a run cannot get a cgroup of its own (not root, or a container's read-only /sys/fs/cgroup): " + noLimits
		c.Fix = "run agentjail as root, or delegate a cgroup subtree to it (systemd: Delegate=yes; Docker: --cgroupns=private with a writable cgroup mount)"
	default:
		c.Status = Pass
		c.Detail = fmt.Sprintf("cgroup v2 at %s; this process's cgroup %s is writable (controllers: %s)", mp, dir, ctrl)
	}
	return c
}

// noLimits is what a run loses without a cgroup it may write.
const noLimits = "limits.memory is not enforced and limits.pids becomes the rlimit nproc"

// v1Limits says where limits.pids and limits.memory go on a host that
// keeps its controllers on cgroup v1.
func v1Limits(h Host) string {
	var found []string
	for _, name := range []string{"pids", "memory"} {
		if slices.ContainsFunc(h.Mounts, func(m procs.Mount) bool { return m.FSType == "cgroup" && slices.Contains(m.Super, name) }) {
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return "no cgroup v1 hierarchy holds the pids or memory controller either: " + noLimits
	}
	if !h.Root {
		return fmt.Sprintf("cgroup v1 offers the controllers (%s), but agentjail runs without root here, which may write them only where a cgroup v1 subtree is delegated to this user; elsewhere %s (the run's record says which)", strings.Join(found, ", "), noLimits)
	}
	return fmt.Sprintf("limits.pids and limits.memory are set in cgroup v1 where it offers the controller (here: %s) and agentjail may write it (as root)", strings.Join(found, ", "))
}

// initCheck is about `agentjail init` on this machine: which binary stays
// resident as PID 1, and who reaps.
func initCheck(h Host) Check {
	c := Check{Name: CheckInit, Status: Pass}
	reaping := "the kernel reaps for it (Linux 6.15's PIDFD_INFO_EXIT keeps the command's status), so orphans never linger as zombies"
	if !h.KernelReaps {
		reaping = "it reaps orphans with wait4, as tini does (the kernel does not keep a reaped process's status for its pidfd: Linux before 6.15, or pidfd_open or its ioctl denied)"
	}
	if h.InitBinary != "" {
		c.Detail = "agentjail init hands over to " + h.InitBinary + "; " + reaping
		return c
	}
	c.Status = Warn
	c.Detail = "agentjail init runs in agentjail itself; " + reaping
	c.Cause = h.InitWhyNot + ": as PID 1, agentjail keeps about twice the memory of agentjail-init resident"
	c.Fix = "install agentjail-init from the same build next to agentjail (make build puts both in bin/), owned by root, mode 0755, in a directory only root can write"
	return c
}

// procFixContainer is how a masked /proc is fixed; procFix adds how it is
// lived with.
const (
	procFixContainer = "run the container with --security-opt systempaths=unconfined (Docker, Podman), or securityContext.procMount: Unmasked (Kubernetes; it requires hostUsers: false)"
	procFix          = procFixContainer + "; or accept a weaker jail: `filesystem: {proc: fresh-or-bind}` in a profile that extends this one, with the agent's sandbox in its weaker mode (Claude Code: sandbox.enableWeakerNestedSandbox; docs/nesting.md)"
)

func hostProcCheck(h Host, j Jail) Check {
	c := Check{Name: CheckHostProc, Status: Pass, Detail: "a fully visible /proc is mounted: the jail can mount a fresh one"}
	if h.MountsErr != nil {
		c.Status = Warn
		c.Detail = "cannot read /proc/self/mountinfo: " + h.MountsErr.Error()
		c.Cause = "without the mount table a run cannot tell whether a fresh /proc will work; it tries one and fails if the kernel refuses (it never degrades on a guess)"
		c.Fix = "mount /proc (mount -t proc proc /proc)"
		return c
	}
	if len(j.Covers) == 0 {
		return c
	}
	c.Detail = "mounts cover parts of /proc: " + strings.Join(j.Covers, ", ")
	c.Cause = "the kernel mounts a new /proc inside a user namespace only when an existing one is fully visible, and these mounts cover parts of it (fs/namespace.c, mnt_already_visible): a container runtime's masked and read-only /proc paths do this (Docker's default maskedPaths and readonlyPaths)"
	c.Fix = procFix
	if j.Fallback {
		c.Status = Warn
		c.Detail += "; the profile allows binding the existing /proc, so runs are degraded"
		c.Fix = procFixContainer
		return c
	}
	c.Status = Fail
	c.Detail += "; runs of this profile refuse to start (fail closed)"
	return c
}

func jailCheck(h Host, j Jail) Check {
	c := Check{Name: CheckJail}
	switch {
	case j.Err != nil:
		msg := j.Err.Error()
		c.Status, c.Detail = Fail, "the "+j.Profile+" profile does not make a jail here"
		c.Cause, c.Fix = msg, "fix what the cause names, then run `agentjail doctor` again"
		if i := lastFixAt(msg); i > 0 {
			c.Cause, c.Fix = msg[:i], msg[i+2:]
		}
	case !j.Started:
		c.Status, c.Detail = Fail, "the "+j.Profile+" jail does not start as "+j.User+": "+oneLine(j.Stderr)
		c.Cause, c.Fix = explain(j.Stderr, h, j, true)
	case j.Degraded:
		c.Status = Warn
		c.Detail = "the " + j.Profile + " jail starts as " + j.User + ", degraded: the existing /proc is bound instead of a fresh one, in agentjail's pid namespace"
		c.Cause = "mounts cover parts of the host's /proc (see host-proc) and the profile allows the fallback"
		c.Fix = procFixContainer
	default:
		c.Status, c.Detail = Pass, "the "+j.Profile+" jail starts as "+j.User+" with a fresh /proc"
	}
	return c
}

// networkCheck judges a proxy jail's network: its own network namespace
// (the jail started with one) and a request from inside reaching the
// broker.
func networkCheck(j Jail) Check {
	c := Check{Name: CheckNetwork}
	p, ok := j.Probes[ProbeBroker]
	switch {
	case !j.Started:
		c.skip()
	case j.NetMode != "proxy":
		c.Status, c.Detail = Pass, "the "+j.Profile+" jail's network is "+j.NetMode+": no broker to reach"
	case j.Broker == "":
		c.Status, c.Detail = Fail, "the jail started in a network namespace of its own, but no listener of the exec stage reached the broker"
		c.Cause = "the exec stage could not listen on the jail's loopback, or agentjail refused its listener (a warning of the run says why)"
		c.Fix = "run `agentjail run -- true` and read its warnings; report it with them"
	case !ok || p.Exit == 126 || p.Exit == 127:
		c.Status, c.Detail = Warn, "a network namespace of the jail's own with the broker listening at "+j.Broker+"; not probed further: "+oneLine(p.Output)
		c.Cause, c.Fix = "curl, which the probe uses, is not installed in the jail", "install curl"
	case p.Exit == 0 && strings.Contains(p.Output, "agentjail broker"):
		c.Status, c.Detail = Pass, "a network namespace of the jail's own, and a request from inside reached the broker at "+j.Broker
	default:
		c.Status, c.Detail = Fail, "a request from inside the jail did not reach the broker at "+j.Broker+": "+oneLine(p.Output)
		c.Cause = "the broker did not answer on the jail's loopback"
		c.Fix = "report it with `agentjail doctor --json`"
	}
	return c
}

// innerChecks judge what the agent's own sandbox can do in the jail.
func innerChecks(h Host, j Jail) []Check {
	type want struct{ name, probe, what string }
	wants := []want{
		{CheckInnerUser, ProbeUserns, "a user namespace (unshare -Ur true)"},
		{CheckInnerProc, ProbeProc, "the agent's own bwrap with user, pid and network namespaces and a fresh /proc"},
		{CheckInnerNet, ProbeNet, "loopback up in a new network namespace"},
	}
	var out []Check
	for _, w := range wants {
		c := Check{Name: w.name}
		p, ok := j.Probes[w.probe]
		switch {
		case !j.Started:
			c.skip()
		case !ok:
			c.Status, c.Detail = Fail, "not probed: the probe script reported nothing for "+w.probe
			c.Cause, c.Fix = "the probe script did not run to its end in the jail", "run `agentjail run --profile "+j.Profile+" -- sh` and try the commands of `agentjail doctor` by hand"
		case p.Exit == 126 || p.Exit == 127:
			c.Status, c.Detail = Warn, "not probed: "+oneLine(p.Output)
			c.Cause, c.Fix = "a tool the probe needs is not installed in the jail", "install util-linux (unshare), bubblewrap and iproute2 (ip)"
		case j.Sealed && p.Exit == 0:
			c.Status, c.Detail = Fail, w.what+" works, but the profile is sealed"
			c.Cause = "the sealed profile must keep the agent from creating namespaces (bwrap --disable-userns, and its seccomp filter)"
			c.Fix = "report this: the jail is weaker than the profile promises"
		case j.Sealed:
			c.Status, c.Detail = Pass, w.what+" is refused, as the sealed profile intends: "+oneLine(p.Output)
		case p.Exit == 0:
			c.Status, c.Detail = Pass, w.what+" works"
		case w.probe == ProbeProc && j.Degraded && j.Probes[ProbeWeak].Exit == 0:
			c.Status = Warn
			c.Detail = w.what + " fails (" + oneLine(p.Output) + "); binding /proc instead, as Claude Code's weaker mode does, it works"
			c.Cause = "the jail binds the existing /proc (degraded; see host-proc), whose covers keep the agent from mounting a fresh one"
			c.Fix = "configure the agent's sandbox for its weaker mode (Claude Code: sandbox.enableWeakerNestedSandbox), or " + procFixContainer
		default:
			c.Status, c.Detail = Fail, w.what+" fails: "+oneLine(p.Output)
			c.Cause, c.Fix = explain(p.Output, h, j, false)
		}
		out = append(out, c)
	}
	return out
}

// explain maps what bwrap, unshare or ip said to a cause and a fix (the
// measurements behind them: docs/nesting.md, What was measured, and for
// AppArmor's restriction docs/apparmor.md). outer says whether it was
// agentjail's own layer that failed.
func explain(msg string, h Host, j Jail, outer bool) (cause, fix string) {
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("Can't mount proc", "mount proc"):
		if outer || j.Degraded {
			cause = "the kernel refuses a new /proc in the jail's user namespace because mounts cover parts of the existing one"
			if len(j.Covers) > 0 {
				cause += " (" + strings.Join(j.Covers, ", ") + ")"
			}
			return cause + ": a container runtime's masked /proc paths (Docker's default maskedPaths and readonlyPaths), or an outer sandbox that covers /proc", procFix
		}
		return "the jail's own /proc carries covers, which bwrap adds when it runs as root (/proc/irq, /proc/bus), so the agent cannot mount a fresh one",
			"run the outer layer as an unprivileged user: let agentjail choose the run user (never --user root with a free profile)"
	case has("No space left on device", "ENOSPC", "max_user_namespaces", "max_*_namespaces"):
		cause = "new user namespaces are forbidden here: the limit user.max_user_namespaces is exhausted or 0 in this or an enclosing user namespace, which is exactly what an enclosing `bwrap --disable-userns` (or agentjail's sealed profile) sets"
		if h.UIDMap != "" && h.UIDMap != "0 0 4294967295" {
			cause += "; agentjail itself runs inside a user namespace (uid_map " + strings.ReplaceAll(h.UIDMap, "\n", "; ") + "), so an enclosing sandbox is the likely cause"
		}
		return cause, "run agentjail outside that sandbox, or start the sandbox without --disable-userns (a free profile, not sealed); on a host: sysctl -w user.max_user_namespaces=15000"
	case has("uid map", "uid_map", "gid_map", "setgroups", "RTM_NEWADDR", "loopback"):
		if h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] == "1" {
			return "AppArmor (kernel.apparmor_restrict_unprivileged_userns=1) lets the namespace be created but withholds the capabilities needed inside it: writing the uid map, bringing up loopback",
				apparmorFix
		}
		return "the process that creates the namespace lacks the capabilities to write its uid map or set up loopback: a root agent with every capability dropped cannot (bwrap --cap-drop ALL), nor can a process an LSM (AppArmor, SELinux) confines",
			"run the agent as an unprivileged uid (agentjail's free profiles do; avoid --user root), and check `dmesg` for AppArmor or SELinux denials"
	case has("Permission denied") && h.AppArmor != "" && h.AppArmor != "unconfined":
		// AppArmor answers EACCES; a seccomp filter answers EPERM.
		return "the AppArmor profile " + h.AppArmor + " confines agentjail and denies what bubblewrap needs (Docker's docker-default and the container runtimes' defaults deny mount)",
			"run the container with --security-opt apparmor=unconfined (Kubernetes: securityContext.appArmorProfile: {type: Unconfined}), or a profile that allows mount, pivot_root and userns; `dmesg` shows the denials"
	case has("Operation not permitted", "No permissions to creat", "Permission denied"):
		switch {
		case h.SeccompMode != "" && h.SeccompMode != "0":
			return "a seccomp filter on agentjail's own process refuses to create namespaces: Docker's default seccomp profile refuses unshare and clone with namespace flags without CAP_SYS_ADMIN",
				"run the container with --security-opt seccomp=FILE (Kubernetes: a Localhost seccompProfile), FILE from `agentjail seccomp export --for-container`"
		case h.Sysctls["kernel.unprivileged_userns_clone"] == "0":
			return "kernel.unprivileged_userns_clone=0 forbids user namespaces to unprivileged users", "sysctl -w kernel.unprivileged_userns_clone=1"
		case h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] == "1":
			return "AppArmor (kernel.apparmor_restrict_unprivileged_userns=1) refuses the namespace", apparmorFix
		}
		return "a security policy refuses to create namespaces: a seccomp filter (a container's profile), AppArmor or SELinux",
			"in a container, use the profile from `agentjail seccomp export --for-container`; check `dmesg` for AppArmor or SELinux denials"
	}
	return "not recognised; the message is in detail", "run the failing command by hand (`agentjail render` prints the jail's command line) and read bubblewrap's message"
}

// oneLine joins a message's lines for a detail field.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")), " ")
}

// WriteText prints the report for people: a line per check, then the cause
// and the fix of every check that is not a pass.
func (r Report) WriteText(w io.Writer) {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	fails, warns, skips := 0, 0, 0
	for _, c := range r.Checks {
		fmt.Fprintf(w, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		switch c.Status {
		case Pass:
			continue
		case Skip:
			skips++
			continue
		case Fail:
			fails++
		default:
			warns++
		}
		pad := strings.Repeat(" ", width+8)
		fmt.Fprintf(w, "%scause: %s\n%sfix:   %s\n", pad, c.Cause, pad, c.Fix)
	}
	switch {
	case fails > 0 && skips > 0:
		fmt.Fprintf(w, "%d failed, %s, %d not probed: the agent's jail or its own sandbox will not work as promised here\n", fails, plural(warns, "warning"), skips)
	case fails > 0:
		fmt.Fprintf(w, "%d failed, %s: the agent's jail or its own sandbox will not work as promised here\n", fails, plural(warns, "warning"))
	default:
		fmt.Fprintf(w, "ok (%s)\n", plural(warns, "warning"))
	}
}

// plural is "n thing", with an s unless n is 1.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

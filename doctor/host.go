package doctor

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strings"

	"github.com/agentjail/agentjail/procs"
)

// Host is what doctor reads about the machine agentjail runs on.
type Host struct {
	// Sysctls maps the knobs doctor reads (UsernsSysctls and
	// kernel.seccomp.actions_avail) to their values; absent knobs are
	// missing from the map.
	Sysctls map[string]string
	// UIDMap is /proc/self/uid_map, one mapping per line, fields single
	// spaced; "0 0 4294967295" in the initial user namespace.
	UIDMap string
	// SeccompMode is the Seccomp field of /proc/self/status: "0" none, "2"
	// a filter is applied to agentjail itself; "" when the kernel has no
	// seccomp at all.
	SeccompMode string
	// AppArmor is the AppArmor label confining agentjail, e.g.
	// "docker-default (enforce)"; "unconfined" or "" when none does.
	AppArmor string
	// Container names the container agentjail runs in and the evidence
	// ("docker (/.dockerenv)"); "" when nothing says it is in one.
	Container string
	// Mounts is /proc/self/mountinfo; MountsErr why it could not be read.
	Mounts    []procs.Mount
	MountsErr error
	// Cgroup is this process's cgroup v2 path ("/" in the root), from the
	// "0::" line of /proc/self/cgroup; "" when there is none.
	Cgroup string
	// CgroupWritable reports whether the cgroup v2 directory of this
	// process can be written (filled in by the caller, which can ask the
	// kernel; see CgroupDir).
	CgroupWritable bool
	// CgroupControllers lists the controllers of that directory.
	CgroupControllers []string
	// InitBinary is the agentjail-init that `agentjail init` would hand
	// over to; InitWhyNot, when InitBinary is "", says why it would run
	// init itself (both filled in by the caller: initcmd.Binary).
	InitBinary, InitWhyNot string
	// Root: agentjail runs as root (filled in by the caller), which the
	// cgroup v1 controllers' files need.
	Root bool
	// KernelReaps: the kernel keeps a released process's status for its
	// pidfd, so init lets the kernel reap (filled in by the caller:
	// reaper.KernelReaps).
	KernelReaps bool
}

// UsernsSysctls are the knobs that allow or forbid unprivileged user
// namespaces: Debian's switch, the per-namespace limit, and Ubuntu's
// AppArmor restriction (>= 23.10).
var UsernsSysctls = []string{
	"kernel.unprivileged_userns_clone",
	"user.max_user_namespaces",
	"kernel.apparmor_restrict_unprivileged_userns",
}

// containerMarks are files container runtimes leave, and what they mean.
var containerMarks = []struct{ file, name string }{
	{".dockerenv", "docker"},
	{"run/.containerenv", "podman"},
	{"var/run/secrets/kubernetes.io/serviceaccount", "kubernetes"},
}

// ReadHost reads the host's facts from root, a filesystem rooted at /
// (os.DirFS("/") in production). What cannot be read stays empty.
func ReadHost(root fs.FS) Host {
	h := Host{Sysctls: map[string]string{}}
	for _, name := range append(UsernsSysctls, "kernel.seccomp.actions_avail") {
		if data, err := fs.ReadFile(root, "proc/sys/"+strings.ReplaceAll(name, ".", "/")); err == nil {
			h.Sysctls[name] = strings.TrimSpace(string(data))
		}
	}
	if data, err := fs.ReadFile(root, "proc/self/uid_map"); err == nil {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		h.UIDMap = strings.Join(lines, "\n")
	}
	if data, err := fs.ReadFile(root, "proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Seccomp:"); ok {
				h.SeccompMode = strings.TrimSpace(v)
			}
		}
	}
	// attr/apparmor/current since Linux 5.8 (the LSM-specific file); the
	// shared attr/current says the same when AppArmor is the major LSM.
	for _, f := range []string{"proc/self/attr/apparmor/current", "proc/self/attr/current"} {
		if data, err := fs.ReadFile(root, f); err == nil {
			if v := strings.TrimSpace(strings.TrimRight(string(data), "\x00")); strings.HasSuffix(v, ")") || v == "unconfined" {
				h.AppArmor = v
				break
			}
		}
	}
	for _, m := range containerMarks {
		if _, err := fs.Stat(root, m.file); err == nil {
			h.Container = m.name + " (/" + m.file + ")"
			break
		}
	}
	if h.Container == "" {
		if data, err := fs.ReadFile(root, "proc/1/environ"); err == nil {
			for _, kv := range bytes.Split(data, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("container=")); ok && len(v) > 0 {
					h.Container = string(v) + " (container= in the environment of pid 1)"
				}
			}
		}
	}
	if f, err := root.Open("proc/self/mountinfo"); err != nil {
		h.MountsErr = err
	} else {
		h.Mounts, h.MountsErr = procs.ParseMountinfo(f)
		f.Close()
	}
	if data, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		h.Cgroup, _ = procs.OwnCgroupPath(string(data))
	}
	if dir := CgroupDir(h); dir != "" {
		if data, err := fs.ReadFile(root, strings.TrimPrefix(path.Join(dir, "cgroup.controllers"), "/")); err == nil {
			h.CgroupControllers = strings.Fields(string(data))
		}
	}
	return h
}

// cgroup2Mount returns where cgroup v2 is mounted, preferring
// /sys/fs/cgroup (the unified layout), or "".
func cgroup2Mount(h Host) string {
	found := ""
	for _, m := range h.Mounts {
		if m.FSType == "cgroup2" && (found == "" || m.Point == "/sys/fs/cgroup") {
			found = m.Point
		}
	}
	return found
}

// CgroupDir is the directory of this process's cgroup v2, or "".
func CgroupDir(h Host) string {
	if h.Cgroup == "" {
		return ""
	}
	return procs.CgroupDir(h.Mounts, h.Cgroup)
}

package doctor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/procs"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o444} }

func TestReadHost(t *testing.T) {
	t.Parallel()
	root := fstest.MapFS{
		"proc/sys/user/max_user_namespaces":                     file("15000\n"),
		"proc/sys/kernel/apparmor_restrict_unprivileged_userns": file("1\n"),
		"proc/sys/kernel/seccomp/actions_avail":                 file("kill_process errno allow\n"),
		"proc/self/uid_map":                                     file("      1000          0          1\n"),
		"proc/self/status":                                      file("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n"),
		"proc/self/mountinfo":                                   file("22 21 0:20 / /proc rw,relatime - proc proc rw\n23 22 0:6 /null /proc/kcore rw - tmpfs tmpfs rw\n24 21 0:30 / /sys/fs/cgroup ro - cgroup2 cgroup rw\n"),
		"proc/self/cgroup":                                      file("0::/docker/abc\n"),
		"sys/fs/cgroup/docker/abc/cgroup.controllers":           file("cpu memory pids\n"),
		"run/.containerenv":                                     file(""),
		"proc/self/attr/apparmor/current":                       file("docker-default (enforce)\n"),
	}
	h := ReadHost(root)
	if h.Sysctls["user.max_user_namespaces"] != "15000" || h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] != "1" {
		t.Errorf("sysctls = %v", h.Sysctls)
	}
	if _, ok := h.Sysctls["kernel.unprivileged_userns_clone"]; ok {
		t.Error("an absent knob was read")
	}
	if h.UIDMap != "1000 0 1" || h.SeccompMode != "2" || h.Container != "podman (/run/.containerenv)" || h.AppArmor != "docker-default (enforce)" {
		t.Errorf("uid_map %q, seccomp %q, container %q, apparmor %q", h.UIDMap, h.SeccompMode, h.Container, h.AppArmor)
	}
	if got := procs.ProcCovers(h.Mounts); len(got) != 1 || got[0] != "/proc/kcore" {
		t.Errorf("covers = %q (mounts %v, %v)", got, h.Mounts, h.MountsErr)
	}
	if CgroupDir(h) != "/sys/fs/cgroup/docker/abc" || strings.Join(h.CgroupControllers, " ") != "cpu memory pids" {
		t.Errorf("cgroup dir %q, controllers %q", CgroupDir(h), h.CgroupControllers)
	}

	bare := ReadHost(fstest.MapFS{})
	if bare.MountsErr == nil || bare.Container != "" || bare.SeccompMode != "" || bare.AppArmor != "" {
		t.Errorf("empty root: %+v", bare)
	}
}

func TestParseProbes(t *testing.T) {
	t.Parallel()
	got := ParseProbes("@@probe userns 0\nbwrap: Can't mount proc on /newroot/proc: Operation not permitted\n@@probe proc 1\n@@probe weak 0\n@@probe bad x\nsh: 1: ip: not found\n@@probe net 127\n")
	want := map[string]Probe{
		ProbeUserns: {0, ""},
		ProbeProc:   {1, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"},
		ProbeWeak:   {0, ""},
		ProbeNet:    {127, "sh: 1: ip: not found"},
	}
	if len(got) != len(want) {
		t.Errorf("ParseProbes = %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %+v, want %+v", k, got[k], v)
		}
	}
}

// healthy is this machine: a VM whose cgroup v2 is in hybrid mode.
func healthy() (Host, bwrap.Info, Jail) {
	h := Host{
		Sysctls:     map[string]string{"user.max_user_namespaces": "96365", "kernel.seccomp.actions_avail": "kill_process errno allow"},
		UIDMap:      "0 0 4294967295",
		SeccompMode: "0",
		Mounts: []procs.Mount{
			{ID: 22, Parent: 27, Root: "/", Point: "/proc", Options: []string{"rw", "relatime"}, FSType: "proc"},
			{ID: 41, Parent: 31, Root: "/", Point: "/sys/fs/cgroup/unified", Options: []string{"rw", "relatime"}, FSType: "cgroup2"},
		},
		Cgroup: "/", CgroupWritable: true,
		InitBinary: "/usr/local/bin/agentjail-init", KernelReaps: true, Root: true,
	}
	b := bwrap.Info{Path: "/usr/bin/bwrap", Version: bwrap.Version{Major: 0, Minor: 8}}
	ok := Probe{Exit: 0}
	j := Jail{Profile: "tier1", User: "nobody (uid 65534)", Started: true, NetMode: "proxy", Broker: "127.0.0.1:3128",
		Probes: map[string]Probe{ProbeUserns: ok, ProbeProc: ok, ProbeWeak: ok, ProbeNet: ok,
			ProbeClaude: {0, "/usr/local/bin/claude"}, ProbeCodex: {1, ""}, ProbeBwrap: {0, "/usr/bin/bwrap\nbubblewrap 0.8.0"},
			ProbeArgv0: {1, ""}, ProbeSocat: {0, "socat version 1.7.4.4"}, ProbeHome: {0, "/home/nobody\n/tmp"},
			ProbeBroker: {0, "agentjail broker"}}}
	return h, b, j
}

func checkOf(t *testing.T, r Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", name, r)
	return Check{}
}

// TestDiagnose maps each way the host can break nesting (docs/nesting.md,
// What was measured; docs/apparmor.md) to its check, cause and fix.
func TestDiagnose(t *testing.T) {
	t.Parallel()
	schema := testutil.CompileSchema(t, SchemaJSON)
	enospc := "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)"
	for _, c := range []struct {
		name   string
		change func(h *Host, b *bwrap.Info, bErr *error, j *Jail)
		ok     bool
		check  string
		status Status
		want   []string // in detail, cause or fix
	}{
		{"healthy", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckBwrap, Pass, []string{"bubblewrap 0.8.0 at /usr/bin/bwrap, not setuid"}},
		{"hybrid cgroup", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckCgroup, Warn, []string{"hybrid mode at /sys/fs/cgroup/unified", "writable", "limits.memory is not enforced"}},
		{"hybrid cgroup, limits on v1", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.Mounts = append(h.Mounts, procs.Mount{ID: 38, Parent: 30, Root: "/", Point: "/sys/fs/cgroup/pids", FSType: "cgroup", Super: []string{"rw", "pids"}},
				procs.Mount{ID: 34, Parent: 30, Root: "/", Point: "/sys/fs/cgroup/memory", FSType: "cgroup", Super: []string{"rw", "memory"}})
		}, true, CheckCgroup, Warn, []string{"hybrid mode", "set in cgroup v1 where it offers the controller (here: pids, memory)"}},
		{"hybrid cgroup, limits on v1, without root", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.Mounts = append(h.Mounts, procs.Mount{ID: 38, Parent: 30, Root: "/", Point: "/sys/fs/cgroup/pids", FSType: "cgroup", Super: []string{"rw", "pids"}},
				procs.Mount{ID: 34, Parent: 30, Root: "/", Point: "/sys/fs/cgroup/memory", FSType: "cgroup", Super: []string{"rw", "memory"}})
			h.Root = false
		}, true, CheckCgroup, Warn, []string{"agentjail runs without root here, which may write them only where a cgroup v1 subtree is delegated to this user; elsewhere limits.memory is not enforced"}},
		{"cgroup v2 not writable", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.Mounts[1].Point, h.CgroupWritable = "/sys/fs/cgroup", false
		}, true, CheckCgroup, Warn, []string{"not writable", "limits.memory is not enforced and limits.pids becomes the rlimit nproc"}},
		{"no bwrap", func(_ *Host, b *bwrap.Info, e *error, j *Jail) {
			*b, *e = bwrap.Info{}, bwrap.ErrNotFound
			*j = Jail{Profile: "tier1", Err: bwrap.ErrNotFound}
		}, false, CheckBwrap, Fail, []string{"not found", "apt-get install bubblewrap"}},
		{"init installed", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckInit, Pass,
			[]string{"hands over to /usr/local/bin/agentjail-init", "the kernel reaps for it"}},
		{"init alone, older kernel", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.InitBinary, h.InitWhyNot, h.KernelReaps = "", "no agentjail-init next to agentjail (in /root/go/bin)", false
		}, true, CheckInit, Warn, []string{"runs in agentjail itself", "reaps orphans with wait4", "no agentjail-init next to agentjail (in /root/go/bin)", "install agentjail-init from the same build next to agentjail"}},
		{"broker reached", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckNetwork, Pass, []string{"a request from inside reached the broker at 127.0.0.1:3128"}},
		{"host network", func(_ *Host, _ *bwrap.Info, _ *error, j *Jail) { j.NetMode, j.Broker = "host", "" }, true, CheckNetwork, Pass, []string{"network is host: no broker"}},
		{"no jail, no network mode", func(_ *Host, _ *bwrap.Info, _ *error, j *Jail) {
			*j = Jail{Profile: "tier1", Err: errors.New("agentjail's run directory /tmp/agentjail-1000: read-only file system")}
		}, false, CheckNetwork, Skip, []string{"not probed: the jail did not start"}},
		{"no listener", func(_ *Host, _ *bwrap.Info, _ *error, j *Jail) { j.Broker = "" }, false, CheckNetwork, Fail, []string{"no listener of the exec stage reached the broker", "read its warnings"}},
		{"broker silent", func(_ *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeBroker] = Probe{7, "curl: (7) Failed to connect to 127.0.0.1 port 3128"}
		}, false, CheckNetwork, Fail, []string{"did not reach the broker", "Failed to connect"}},
		{"no curl", func(_ *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeBroker] = Probe{127, "sh: 1: curl: not found"}
		}, true, CheckNetwork, Warn, []string{"install curl"}},
		{"setuid bwrap", func(_ *Host, b *bwrap.Info, _ *error, _ *Jail) { b.Setuid = true }, true, CheckBwrap, Warn, []string{"setuid root", "chmod u-s"}},
		{"debian knob", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) { h.Sysctls["kernel.unprivileged_userns_clone"] = "0" }, false, CheckUserns, Fail,
			[]string{"kernel.unprivileged_userns_clone=0", "sysctl -w kernel.unprivileged_userns_clone=1"}},
		{"no user namespaces left", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) { h.Sysctls["user.max_user_namespaces"] = "0" }, false, CheckUserns, Fail,
			[]string{"user.max_user_namespaces=0", "sysctl -w user.max_user_namespaces="}},
		{"ubuntu apparmor knob", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] = "1"
		}, true, CheckUserns, Warn, []string{"AppArmor restricts unprivileged user namespaces", "/usr/bin/bwrap an unconfined-mode AppArmor profile with `userns,`", "docs/apparmor.md"}},
		{"inside bwrap --disable-userns", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			h.UIDMap = "1000 0 1"
			j.Started, j.Stderr, j.Probes = false, enospc+"\n", nil
		}, false, CheckJail, Fail, []string{enospc, "user namespaces are forbidden here", "bwrap --disable-userns", "runs inside a user namespace (uid_map 1000 0 1)", "outside that sandbox"}},
		{"masked /proc, fail closed", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Covers = []string{"/proc/kcore", "/proc/timer_list"}
			j.Started, j.Stderr, j.Probes = false, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n", nil
		}, false, CheckJail, Fail, []string{"Can't mount proc", "/proc/kcore, /proc/timer_list", "maskedPaths", "systempaths=unconfined", "procMount: Unmasked", "proc: fresh-or-bind", "enableWeakerNestedSandbox"}},
		{"masked /proc, host-proc", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Covers = []string{"/proc/kcore"}
			j.Started, j.Stderr, j.Probes = false, "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n", nil
		}, false, CheckHostProc, Fail, []string{"/proc/kcore", "refuse to start", "mnt_already_visible", "systempaths=unconfined", "fresh-or-bind"}},
		{"masked /proc, degraded", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Covers, j.Fallback, j.Degraded = []string{"/proc/kcore"}, true, true
			j.Probes[ProbeProc] = Probe{Exit: 1, Output: "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"}
		}, true, CheckInnerProc, Warn, []string{"binding /proc instead", "enableWeakerNestedSandbox", "systempaths=unconfined"}},
		{"masked /proc, degraded, weak mode broken too", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Covers, j.Fallback, j.Degraded = []string{"/proc/kcore"}, true, true
			j.Probes[ProbeProc] = Probe{Exit: 1, Output: "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"}
			j.Probes[ProbeWeak] = Probe{Exit: 1, Output: "bwrap: open /proc/3/ns/ns failed: No such file or directory"}
		}, false, CheckInnerProc, Fail, []string{"masked /proc paths"}},
		{"container seccomp refuses unshare", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			h.SeccompMode = "2"
			j.Probes[ProbeUserns] = Probe{Exit: 1, Output: "unshare: unshare failed: Operation not permitted"}
		}, false, CheckInnerUser, Fail, []string{"seccomp filter on agentjail's own process", "agentjail seccomp export --for-container"}},
		{"container apparmor denies mount", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			h.SeccompMode, h.AppArmor = "2", "docker-default (enforce)"
			j.Started, j.Stderr, j.Probes = false, "bwrap: Failed to make / slave: Permission denied\n", nil
		}, false, CheckJail, Fail, []string{"the AppArmor profile docker-default (enforce) confines agentjail", "--security-opt apparmor=unconfined", "appArmorProfile: {type: Unconfined}"}},
		{"container apparmor noted", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) {
			h.Container, h.AppArmor = "docker (/.dockerenv)", "docker-default (enforce)"
		}, true, CheckContainer, Pass, []string{"confined by the AppArmor profile docker-default (enforce)"}},
		{"container seccomp noted", func(h *Host, _ *bwrap.Info, _ *error, _ *Jail) { h.SeccompMode = "2" }, true, CheckSeccomp, Warn,
			[]string{"already runs under a seccomp filter", "--for-container"}},
		{"apparmor withholds loopback", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			h.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] = "1"
			j.Probes[ProbeNet] = Probe{Exit: 1, Output: "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"}
		}, false, CheckInnerNet, Fail, []string{"RTM_NEWADDR", "AppArmor (kernel.apparmor_restrict_unprivileged_userns=1)", "/usr/bin/bwrap an unconfined-mode AppArmor profile with `userns,`", "docs/apparmor.md"}},
		{"capless root cannot map uids", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeProc] = Probe{Exit: 1, Output: "bwrap: setting up uid map: Operation not permitted"}
		}, false, CheckInnerProc, Fail, []string{"capabilities to write its uid map", "--cap-drop ALL", "unprivileged uid"}},
		{"inner proc covered by a root outer layer", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeProc] = Probe{Exit: 1, Output: "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"}
		}, false, CheckInnerProc, Fail, []string{"bwrap adds when it runs as root", "unprivileged user"}},
		{"tool missing", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeNet] = Probe{Exit: 127, Output: "timeout: failed to run command 'unshare': No such file or directory"}
		}, true, CheckInnerNet, Warn, []string{"not probed", "util-linux"}},
		{"sealed refuses", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Sealed = true
			for _, p := range []string{ProbeUserns, ProbeProc, ProbeWeak, ProbeNet} {
				j.Probes[p] = Probe{Exit: 1, Output: enospc}
			}
		}, true, CheckInnerProc, Pass, []string{"is refused, as the sealed profile intends", "ENOSPC"}},
		{"sealed leaks", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) { j.Sealed = true }, false, CheckInnerUser, Fail, []string{"works, but the profile is sealed"}},
		{"claude's sandbox", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckClaude, Pass, []string{"finds bubblewrap and socat"}},
		{"claude without socat", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeSocat] = Probe{Exit: 126, Output: "timeout: failed to run command 'socat': Permission denied"}
		}, false, CheckClaude, Fail, []string{"lacks socat in the jail", "claude is at /usr/local/bin/claude", "bridge its network proxy", "failIfUnavailable", "apt-get install socat"}},
		{"no claude, no socat, no bwrap", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeClaude] = Probe{Exit: 1}
			j.Probes[ProbeSocat] = Probe{Exit: 127}
			j.Probes[ProbeBwrap] = Probe{Exit: 1}
		}, true, CheckClaude, Warn, []string{"lacks bubblewrap (bwrap) and socat", "claude is not on the jail's PATH", "apt-get install bubblewrap", "apt-get install socat"}},
		{"codex's sandbox on bwrap 0.8", func(*Host, *bwrap.Info, *error, *Jail) {}, true, CheckCodex, Pass, []string{"/usr/bin/bwrap, bubblewrap 0.8.0, without --argv0", "on the private home /home/nobody"}},
		{"codex's sandbox with --argv0", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) { j.Probes[ProbeArgv0] = Probe{} }, true, CheckCodex, Pass, []string{"which has --argv0"}},
		{"codex's own bwrap", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) { j.Probes[ProbeBwrap] = Probe{Exit: 1} }, false, CheckCodex, Pass, []string{"the bubblewrap it bundles"}},
		{"codex home under /tmp", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeCodex] = Probe{Exit: 0, Output: "/opt/codex/bin/codex"}
			j.Probes[ProbeHome] = Probe{Exit: 0, Output: "/tmp/home/nobody\n/tmp"}
		}, false, CheckCodex, Fail, []string{"home /tmp/home/nobody lies under the temporary directory", "codex is at /opt/codex/bin/codex", "execvp codex-linux-sandbox", "create the run user's home directory", "bubblewrap >= 0.9"}},
		{"codex absent, home under /tmp", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Probes[ProbeHome] = Probe{Exit: 0, Output: "/tmp/home/nobody\n/tmp"}
		}, true, CheckCodex, Warn, []string{"codex is not on the jail's PATH"}},
		{"sealed agents", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			j.Sealed = true
			for _, p := range []string{ProbeUserns, ProbeProc, ProbeWeak, ProbeNet} {
				j.Probes[p] = Probe{Exit: 1, Output: enospc}
			}
			j.Probes[ProbeSocat] = Probe{Exit: 127}
		}, true, CheckClaude, Pass, []string{"cannot start in the sealed profile, as intended"}},
		{"bad profile", func(h *Host, _ *bwrap.Info, _ *error, j *Jail) {
			*j = Jail{Profile: "x.yaml", Err: errors.New("x.yaml:1:1: unknown field")}
		}, false, CheckInnerNet, Skip, []string{"not probed: the jail did not start"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h, b, j := healthy()
			var bErr error
			c.change(&h, &b, &bErr, &j)
			r := Diagnose(h, b, bErr, j)
			if r.OK != c.ok {
				t.Errorf("ok = %v, want %v: %+v", r.OK, c.ok, r)
			}
			got := checkOf(t, r, c.check)
			if got.Status != c.status {
				t.Errorf("%s = %s, want %s: %+v", c.check, got.Status, c.status, got)
			}
			all := got.Detail + "\n" + got.Cause + "\n" + got.Fix
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("%s lacks %q:\n%s", c.check, w, all)
				}
			}
			data, _ := json.Marshal(r)
			if err := testutil.Validate(schema, data); err != nil {
				t.Errorf("report does not match the schema: %v\n%s", err, data)
			}
		})
	}
}

// TestHealthyReportPassesEverything: on a good host only the informational
// cgroup check is not a pass, and the text says ok.
func TestHealthyReportPassesEverything(t *testing.T) {
	t.Parallel()
	h, b, j := healthy()
	h.Mounts[1].Point = "/sys/fs/cgroup"
	r := Diagnose(h, b, nil, j)
	for _, c := range r.Checks {
		if c.Status != Pass {
			t.Errorf("%s = %s: %+v", c.Name, c.Status, c)
		}
	}
	var text strings.Builder
	r.WriteText(&text)
	if !strings.HasSuffix(text.String(), "ok (0 warnings)\n") || !strings.Contains(text.String(), "pass  inner-proc ") {
		t.Errorf("text:\n%s", text.String())
	}
}

// TestSchemaRefuses keeps the schema honest: it is not a schema that
// accepts everything.
func TestSchemaRefuses(t *testing.T) {
	t.Parallel()
	s := testutil.CompileSchema(t, SchemaJSON)
	for _, bad := range []string{
		`{"ok": true}`,
		`{"ok": true, "checks": []}`,
		`{"ok": true, "checks": [{"name": "x", "status": "maybe", "detail": "d", "cause": "", "fix": ""}]}`,
		`{"ok": false, "checks": [{"name": "x", "status": "fail", "detail": "d", "cause": "", "fix": ""}]}`,
		`{"ok": true, "checks": [{"name": "x", "status": "pass", "detail": "d"}]}`,
	} {
		if testutil.Validate(s, []byte(bad)) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
}

// TestJailRefusedSaysCauseAndFix: agentjail's own message ends with its
// fix; a jail refused before its launch shows the two parts as the check's
// cause and fix, and the checks that needed the jail as not probed.
func TestJailRefusedSaysCauseAndFix(t *testing.T) {
	t.Parallel()
	h, b, j := healthy()
	j = Jail{Profile: "tier1", Err: errors.New("writable root /srv/x is not writable by you (op, uid 1000), as whom the agent runs; give a directory of your own")}
	r := Diagnose(h, b, nil, j)
	c := checkOf(t, r, CheckJail)
	if c.Status != Fail || c.Cause != "writable root /srv/x is not writable by you (op, uid 1000), as whom the agent runs" || c.Fix != "give a directory of your own" {
		t.Errorf("jail check %+v", c)
	}
	var out strings.Builder
	r.WriteText(&out)
	if !strings.Contains(out.String(), "1 failed, 1 warning, 6 not probed") {
		t.Errorf("summary:\n%s", out.String())
	}
}

// TestLastFixAt: the fix of a message begins at its last "; " outside
// quotes; a "; " in a quoted path or a command is the cause's.
func TestLastFixAt(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"root /x is not writable; give another":                     "give another",
		`root "/home/u/notes; draft" is not writable; give another`: "give another",
		"a; b; fix with `rm 'a; b' && cp -a x y`":                   "fix with `rm 'a; b' && cp -a x y`",
		`path "a\"; b" is bad; fix it`:                              "fix it",
		"no fix here":                                               "",
		"first; fix\nsecond; fix":                                   "",
		`unclosed "quote; x`:                                        "",
		"the fix is $'a\\'; b'; run it":                             "run it",
	} {
		got := ""
		if i := lastFixAt(msg); i >= 0 {
			got = msg[i+2:]
		}
		if got != want {
			t.Errorf("lastFixAt(%q): fix %q, want %q", msg, got, want)
		}
	}
}

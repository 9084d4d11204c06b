package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exhaustionWait is the hang detector of the exhaustion tests: reaching a
// cap of 4096 tasks takes seconds on an idle host, most of a minute on a
// busy two-CPU one. Never a timed assertion.
const exhaustionWait = 5 * time.Minute

// forkerIn builds testdata/forker (the fork bomb) into dir, which jails see.
func forkerIn(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "forker")
	if err := buildTool(bin, "forker"); err != "" {
		t.Fatal(err)
	}
	return bin
}

// runWithin runs agentjail like aj, with d as the hang detector.
func runWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	b := start(t, nil, args...)
	select {
	case <-b.exited:
	case <-time.After(d):
		t.Fatalf("agentjail %q did not finish in %v; stderr:\n%s", args, d, b.stderr.String())
	}
	return result{b.stdout.String(), b.stderr.String(), b.code}
}

// agentjailLines are the lines agentjail itself printed on stderr, but
// for degradations (wantDegradationsPrinted checks those).
func agentjailLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "agentjail: ") && !strings.HasPrefix(l, "agentjail: degraded: ") {
			out = append(out, l)
		}
	}
	return out
}

// wantCgroupsGone fails when a run's cgroups outlived it.
func wantCgroupsGone(t *testing.T, rec runRecord) {
	t.Helper()
	dirs := []string{rec.Limits.Cgroup}
	for _, d := range rec.Limits.CgroupV1 {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d != "" && fileExists(d) {
			t.Errorf("the run's cgroup %s was left behind", d)
		}
	}
}

// TestEscapeExhaustion: plain bwrap caps neither the tasks nor the memory
// of a jail (an inner tmpfs the agent mounts itself is not even bounded by
// the sizes of the jail's own). Under agentjail's default tier1 a fork
// bomb is held at limits.pids and the run ends as soon as a fork is
// refused, not at the wall limit; filling an inner tmpfs past limits.memory
// ends the run at the first OOM kill. Each ends with its reason, exit 122
// and one line on stderr.
func TestEscapeExhaustion(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	forker := forkerIn(t, dir)

	t.Run("processes", func(t *testing.T) {
		t.Parallel()
		const defaultCap = 4096 // profiles/_base.yaml
		c := plainBwrap{cred: uid1000, timeout: exhaustionWait}.run(t, forker, strconv.Itoa(defaultCap+1))
		holeShown(t, c.stdout == fmt.Sprintf("forked %d\n", defaultCap+1), fmt.Sprintf("more than %d tasks", defaultCap), c)

		// -hold retries every refused fork for ever, as a fork bomb at a
		// cap does: only agentjail can end this run before its wall limit.
		rp := recordPath(t)
		r := runWithin(t, exhaustionWait, "run", "--profile", "tier1", "--record", rp, "--", forker, "-hold", strconv.Itoa(defaultCap+1))
		wantCode(t, r, 122)
		rec := readRecord(t, rp, 122)
		if rec.Reason != "pids_limit" || rec.Limits.PidsMax == nil || *rec.Limits.PidsMax != defaultCap {
			t.Fatalf("reason %q, pids_max %v; want pids_limit at %d\n%s", rec.Reason, rec.Limits.PidsMax, defaultCap, r.stderr)
		}
		// The bomb says how many it made once a fork fails, which is when
		// agentjail ends the run: the SIGKILL may come first, and then the
		// record's peak and refusals below say it.
		var forked int
		if _, err := fmt.Sscanf(r.stdout, "forked %d\n", &forked); r.stdout != "" && (err != nil || forked >= defaultCap) {
			t.Errorf("the bomb made %d of %d (stdout %q), want fewer than the cap", forked, defaultCap+1, r.stdout)
		}
		if rec.Limits.PidsRefused == nil || *rec.Limits.PidsRefused == 0 || rec.Limits.PidsPeak == nil || *rec.Limits.PidsPeak != defaultCap {
			t.Fatalf("pids_refused %v, pids_peak %v; want refusals at a peak of %d", rec.Limits.PidsRefused, rec.Limits.PidsPeak, defaultCap)
		}
		t.Logf("the bomb made %d processes; the run ended after %d ms with %d forks refused", forked, rec.DurationMS, *rec.Limits.PidsRefused)
		if s := rec.SignalsSent; len(s) != 1 || s[0].Signal != "SIGKILL" || s[0].Target != "group" {
			t.Errorf("signals sent %+v, want one SIGKILL to the jail's group, no grace", s)
		}
		// The cgroup's kill takes bubblewrap too, before it can report the
		// agent's status (docs/supervision.md, agent_exit_code).
		if rec.AgentExitCode != nil {
			t.Errorf("agent_exit_code %d, want null: bubblewrap is killed with the jail", *rec.AgentExitCode)
		}
		lines := agentjailLines(r.stderr)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "agentjail: the run ended: limits.pids reached (4096 tasks)") || !strings.Contains(lines[0], "exit 122") {
			t.Errorf("agentjail's own lines on stderr %q, want the one about limits.pids", lines)
		}
		wantDegradationsPrinted(t, r.stderr, rec)
		wantCgroupsGone(t, rec)
		if left := procsWithEnv("AGENTJAIL_RUN=" + rec.RunID); len(left) > 0 {
			t.Errorf("processes of the run left: %d, e.g. %s", len(left), left[0])
		}
	})

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		// The default cap is half the host's RAM: too much to fill in a
		// test. A child profile lowers it; the mechanism is the same.
		write(t, dir, map[string]string{"memory.yaml": "extends: tier1\nlimits:\n  memory: 256MiB\n"})
		fill := `unshare -rm sh -c 'mount -t tmpfs -o size=2g none /tmp && dd if=/dev/zero of=/tmp/fill bs=1M count=512 2>/dev/null; echo "dd exit $?"; df -m /tmp | tail -n 1'`
		c := plainBwrap{cred: uid1000, timeout: exhaustionWait}.run(t, "sh", "-c", fill)
		f := strings.Fields(c.stdout)
		holeShown(t, strings.Contains(c.stdout, "dd exit 0") && len(f) > 5 && f[5] == "512", "512 MiB written into an inner tmpfs, past a 256 MiB cap", c)

		rp := recordPath(t)
		// The sleep stands for an agent that goes on after a process of
		// its was killed: only agentjail ends the run.
		r := runWithin(t, exhaustionWait, "run", "--profile", filepath.Join(dir, "memory.yaml"), "--record", rp, "--", "sh", "-c", fill+"; sleep 600")
		wantCode(t, r, 122)
		rec := readRecord(t, rp, 122)
		if rec.Reason != "memory_limit" || rec.Limits.MemoryMax == nil || *rec.Limits.MemoryMax != 256<<20 {
			t.Fatalf("reason %q, memory_max %v; want memory_limit at 256 MiB\n%s", rec.Reason, rec.Limits.MemoryMax, r.stderr)
		}
		if strings.Contains(r.stdout, "dd exit 0") {
			t.Errorf("the inner tmpfs took 512 MiB under a 256 MiB cap:\n%s", r.stdout)
		}
		if rec.Limits.OOMKills == nil || *rec.Limits.OOMKills == 0 || rec.Limits.MemoryPeak == nil || *rec.Limits.MemoryPeak > 256<<20 {
			t.Fatalf("oom_kills %v, memory_peak %v; want a kill at a peak of at most 256 MiB", rec.Limits.OOMKills, rec.Limits.MemoryPeak)
		}
		t.Logf("plain bwrap: %s; agentjail: %q, ended after %d ms, %d OOM kills at a peak of %d bytes", strings.TrimSpace(c.stdout), r.stdout, rec.DurationMS, *rec.Limits.OOMKills, *rec.Limits.MemoryPeak)
		lines := agentjailLines(r.stderr)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "agentjail: the run ended: limits.memory reached (256.0 MiB") {
			t.Errorf("agentjail's own lines on stderr %q, want the one about limits.memory", lines)
		}
		wantDegradationsPrinted(t, r.stderr, rec, "cgroup.memory")
		wantCgroupsGone(t, rec)
		if left := procsWithEnv("AGENTJAIL_RUN=" + rec.RunID); len(left) > 0 {
			t.Errorf("processes of the run left: %v", left)
		}
	})
}

// TestDefaultCaps: every built-in profile caps the jail's tasks (4096) and
// memory (half the host's RAM, no swap) in the run's cgroups, wherever
// this host keeps the controllers, which the test says; a host that
// offers neither must say so in the record instead. Where the host offers
// a controller to root (a v1 hierarchy /proc/self/cgroup lists, or the v2
// root's cgroup.controllers), the run must be placed in it: the
// degradation branches are for hosts that do not.
func TestDefaultCaps(t *testing.T) {
	jailed(t)
	offers := map[string]bool{}
	for _, c := range []string{"pids", "memory"} {
		offers[c] = offered(t, c)
		t.Logf("this host offers the %s controller to root: %v", c, offers[c])
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var ramKiB int64
	for _, l := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "MemTotal:" {
			ramKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	for _, profile := range []string{"tier1", "tier2", "tier3", "sealed"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			r := aj(t, "run", "--profile", profile, "--record", rp, "--", "true")
			wantCode(t, r, 0)
			rec := readRecord(t, rp, 0)
			degraded := map[string]string{}
			for _, d := range rec.Degradations {
				degraded[d.What] = d.Detail
			}
			where := func(controller string) string {
				if d := rec.Limits.CgroupV1[controller]; d != "" {
					return "cgroup v1 " + d
				}
				return "cgroup v2 " + rec.Limits.Cgroup
			}
			switch l := rec.Limits; {
			case l.PidsMax != nil:
				if *l.PidsMax != 4096 || l.PidsRefused == nil || *l.PidsRefused != 0 {
					t.Errorf("pids_max %d, pids_refused %v", *l.PidsMax, l.PidsRefused)
				}
				t.Logf("pids.max 4096 in %s", where("pids"))
			case offers["pids"]:
				t.Errorf("the host offers the pids controller, yet the run has no pids.max: %q", degraded["cgroup.pids"])
			case !strings.Contains(degraded["cgroup.pids"], "rlimit nproc") || l.Rlimits["nproc"] != "4096":
				t.Errorf("no pids.max, yet degradation %q and rlimit nproc %q", degraded["cgroup.pids"], l.Rlimits["nproc"])
			default:
				t.Logf("no pids controller here: %s", degraded["cgroup.pids"])
			}
			switch l := rec.Limits; {
			case l.MemoryMax != nil:
				if *l.MemoryMax != ramKiB<<10*50/100 || l.OOMKills == nil || *l.OOMKills != 0 {
					t.Errorf("memory_max %d, want half of %d KiB; oom_kills %v", *l.MemoryMax, ramKiB, l.OOMKills)
				}
				if l.SwapMax != nil && *l.SwapMax != 0 || l.SwapMax == nil && degraded["cgroup.swap"] == "" && swapTotal(meminfo) > 0 {
					t.Errorf("swap_max %v on a host with swap, degradation %q", l.SwapMax, degraded["cgroup.swap"])
				}
				swap := "not capped"
				if l.SwapMax != nil {
					swap = strconv.FormatInt(*l.SwapMax, 10)
				}
				t.Logf("memory.max %d bytes (swap %s) in %s", *l.MemoryMax, swap, where("memory"))
			case offers["memory"]:
				t.Errorf("the host offers the memory controller, yet the run has no memory.max: %q", degraded["cgroup.memory"])
			case !strings.Contains(degraded["cgroup.memory"], "not enforced"):
				t.Errorf("no memory limit, yet degradation %q", degraded["cgroup.memory"])
			default:
				t.Logf("no memory controller here: %s", degraded["cgroup.memory"])
			}
			wantCgroupsGone(t, rec)
		})
	}
}

// offered reports whether this host gives root the cgroup controller: a
// cgroup v1 hierarchy that /proc/self/cgroup lists it in
// ("4:memory:/..."), or the cgroup v2 root's cgroup.controllers.
func offered(t *testing.T, controller string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && slicesContains(strings.Split(f[1], ","), controller) {
			return true
		}
	}
	v2, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return slicesContains(strings.Fields(string(v2)), controller)
}

func swapTotal(meminfo []byte) int64 {
	for _, l := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "SwapTotal:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// TestLimitsWithoutACgroup: agentjail started by an ordinary user gets no
// cgroup (v1 and v2 are root's here). limits.pids then holds as the rlimit
// nproc, which since Linux 5.14 counts the jail's user namespace only (the
// same user's processes outside do not count), but reaching it is not
// seen: the run ends as the agent decides, and the record says what it
// cannot report. limits.memory is not enforced, and the record says so.
func TestLimitsWithoutACgroup(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	forker := forkerIn(t, dir)
	write(t, dir, map[string]string{"small.yaml": "extends: tier1\nlimits:\n  pids: 64\n"})
	xdg := visibleDir(t) // the operator's (uid 1000) runtime directory
	os.Chmod(xdg, 0o700)
	ws := workspace(t)
	inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}

	// The same user's processes outside the jail do not count against it.
	var outside []*exec.Cmd
	for range 80 {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: uid1000}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outside = append(outside, cmd)
	}
	t.Cleanup(func() {
		for _, cmd := range outside {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	rp := filepath.Join(workspace(t), "record.json") // the operator's
	r := inv.run(t, "run", "--profile", filepath.Join(dir, "small.yaml"), "--write", ws, "--record", rp, "--", forker, "100")
	wantCode(t, r, 0)
	rec := readRecord(t, rp, 0)
	var forked int
	if _, err := fmt.Sscanf(r.stdout, "forked %d\n", &forked); err != nil || forked >= 64 || forked < 32 {
		t.Errorf("stdout %q: want the forks held below 64, and the 80 processes outside not counted", r.stdout)
	}
	if !strings.Contains(r.stderr, "forker: fork ") {
		t.Errorf("no fork was refused:\n%s", r.stderr)
	}
	degraded := map[string]string{}
	for _, d := range rec.Degradations {
		degraded[d.What] = d.Detail
	}
	l := rec.Limits
	if rec.Reason != "exit" || l.Rlimits["nproc"] != "64" || l.PidsMax != nil || l.PidsRefused != nil || l.PidsPeak != nil ||
		!strings.Contains(degraded["cgroup.pids"], "rlimit nproc") || !strings.Contains(degraded["cgroup.pids"], "not seen") {
		t.Errorf("reason %q, rlimits %v, pids_max %v, pids_refused %v; degradation %q", rec.Reason, l.Rlimits, l.PidsMax, l.PidsRefused, degraded["cgroup.pids"])
	}
	if l.MemoryMax != nil || l.OOMKills != nil || l.MemoryPeak != nil || !strings.Contains(degraded["cgroup.memory"], "not enforced") {
		t.Errorf("memory_max %v, oom_kills %v; degradation %q", l.MemoryMax, l.OOMKills, degraded["cgroup.memory"])
	}
	wantDegradationsPrinted(t, r.stderr, rec, "cgroup.pids")
}

// TestManyViolationsAreCounted: an agent that makes protected names by
// the hundred thousand (.env.1, .env.2, …; a few seconds of its run) made
// agentjail print a line for each and write a record of tens of
// megabytes, after checks that took minutes (they compared every finding
// with every other). Now the checks are linear, the first 50 are
// printed, the first 1000 listed, and all of them counted.
func TestManyViolationsAreCounted(t *testing.T) {
	jailed(t)
	p := workspace(t)
	rp := recordPath(t)
	r := runWithin(t, exhaustionWait, "run", "--write", p, "--chdir", p, "--record", rp, "--", "python3", "-c",
		`for i in range(20000): open(".env.%d" % i, "w").close()`)
	wantCode(t, r, 123)
	rec := readRecord(t, rp, 123)
	if len(rec.Violations) != 1000 || rec.ViolationsDropped != 19000 || rec.ViolationCounts["protected"] != 20000 {
		t.Errorf("violations listed %d, dropped %d, counts %v; want 1000, 19000, 20000 protected", len(rec.Violations), rec.ViolationsDropped, rec.ViolationCounts)
	}
	lines := agentjailLines(r.stderr)
	if len(lines) != 52 || lines[50] != "agentjail: violation: … and 19950 more (the record lists the first 1000 and counts them all)" ||
		!strings.HasPrefix(lines[51], "agentjail: the run ended: the checks after it found the policy violated (20000 protected, the first 50 listed above) (exit 123)") {
		t.Errorf("%d lines of agentjail's, want 50 violations, a count of the rest and the ending; the last two: %q", len(lines), lines[max(0, len(lines)-2):])
	}
}

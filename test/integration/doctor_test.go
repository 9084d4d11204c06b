package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentjail/agentjail/doctor"
	"github.com/agentjail/agentjail/internal/testutil"
)

// doctorJSON runs `agentjail doctor --json` under inv, checks its output
// against the report's schema, and returns it with the exit code.
func doctorJSON(t *testing.T, inv invocation, args ...string) (doctor.Report, int) {
	t.Helper()
	r := inv.run(t, append([]string{"doctor", "--json"}, args...)...)
	if err := testutil.Validate(testutil.CompileSchema(t, doctor.SchemaJSON), []byte(r.stdout)); err != nil {
		t.Fatalf("doctor --json does not match its schema: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	rep := decodeDoctor(t, r)
	if want := map[bool]int{true: 0, false: 1}[rep.OK]; r.code != want {
		t.Errorf("doctor exits %d with ok=%v, want %d", r.code, rep.OK, want)
	}
	return rep, r.code
}

// decodeDoctor reads the report `agentjail doctor --json` printed.
func decodeDoctor(t *testing.T, r result) doctor.Report {
	t.Helper()
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return rep
}

func check(t *testing.T, rep doctor.Report, name string) doctor.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check: %+v", name, rep)
	return doctor.Check{}
}

// TestDoctorPassesHere: on this machine, as root and as uid 1000, every
// check passes but the informational ones, the probes ran in the real
// jail, and bwrap's version is named.
func TestDoctorPassesHere(t *testing.T) {
	jailed(t)
	out, err := exec.Command("bwrap", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(out)) // "bubblewrap 0.8.0"
	for _, c := range []struct {
		name string
		inv  invocation
	}{
		{"root", invocation{}},
		{"uid 1000", invocation{env: []string{"HOME=/"}, cred: &syscall.Credential{Uid: runUID, Gid: runUID}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			text := c.inv.run(t, "doctor")
			wantCode(t, text, 0)
			if !strings.Contains(text.stdout, "pass  bwrap ") || !strings.Contains(text.stdout, version+" at ") {
				t.Errorf("doctor does not name %q:\n%s", version, text.stdout)
			}
			rep, _ := doctorJSON(t, c.inv)
			if !rep.OK {
				t.Fatalf("doctor fails here: %+v", rep)
			}
			for _, name := range []string{"bwrap", "userns-sysctls", "seccomp", "host-proc", "jail", "network", "inner-userns", "inner-proc", "inner-netns", "init"} {
				if got := check(t, rep, name); got.Status != doctor.Pass {
					t.Errorf("%s = %s: %+v", name, got.Status, got)
				}
			}
			for _, name := range []string{"container", "cgroup-v2"} {
				if got := check(t, rep, name); got.Status == doctor.Fail {
					t.Errorf("%s fails: %+v", name, got)
				}
			}
		})
	}
	// The sealed profile passes too: its probes must be refused.
	rep, _ := doctorJSON(t, invocation{}, "--profile", "sealed")
	if c := check(t, rep, "inner-userns"); !rep.OK || c.Status != doctor.Pass || !strings.Contains(c.Detail, "refused, as the sealed profile intends") {
		t.Errorf("doctor --profile sealed: %+v", rep)
	}
}

// TestDoctorInsideDisableUserns: run by a non-root user inside a sandbox
// that forbids user namespaces, doctor fails and says why.
func TestDoctorInsideDisableUserns(t *testing.T) {
	jailed(t)
	inv := invocation{
		env:  []string{"HOME=/"},
		cred: &syscall.Credential{Uid: runUID, Gid: runUID},
		// A writable /tmp, as a sandbox has: agentjail's run directory
		// (/tmp/agentjail-UID) must not be what fails on a fresh host.
		wrap: []string{"bwrap", "--ro-bind", "/", "/", "--bind", "/tmp", "/tmp", "--unshare-user", "--disable-userns", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "--die-with-parent", "--"},
	}
	text := inv.run(t, "doctor")
	wantCode(t, text, 1)
	for _, want := range []string{"fail  jail", "Creating new namespace failed", "user namespaces are forbidden here", "bwrap --disable-userns", "agentjail itself runs inside a user namespace", "run agentjail outside that sandbox"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, text.stdout)
		}
	}
	rep, code := doctorJSON(t, inv)
	if code != 1 || rep.OK || check(t, rep, "jail").Status != doctor.Fail {
		t.Errorf("doctor --json: %d %+v", code, rep)
	}
}

// TestDoctorUnderMaskedProc: where a container runtime masks /proc paths,
// doctor names the cause, the container settings that fix it, and the
// fallback.
func TestDoctorUnderMaskedProc(t *testing.T) {
	jailed(t)
	inv := invocation{wrap: maskedProc}
	text := inv.run(t, "doctor")
	wantCode(t, text, 1)
	for _, want := range []string{"fail  host-proc", "/proc/timer_list", "fail  jail", "Can't mount proc", "maskedPaths",
		"--security-opt systempaths=unconfined", "procMount: Unmasked", "filesystem: {proc: fresh-or-bind}", "enableWeakerNestedSandbox"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, text.stdout)
		}
	}
	rep, _ := doctorJSON(t, inv)
	if hp := check(t, rep, "host-proc"); hp.Status != doctor.Fail || !strings.Contains(hp.Fix, "systempaths=unconfined") {
		t.Errorf("host-proc: %+v", hp)
	}
}

// TestDoctorDegradedUnderMaskedProc: where a run must degrade (a masked
// /proc and a profile that allows binding it), doctor starts the jail as a
// run would, degraded, and says so: nothing fails, host-proc, jail and
// inner-proc warn, the agent's own sandbox is said to work in its weaker
// mode only, and the rest of it (user and network namespaces) passes.
func TestDoctorDegradedUnderMaskedProc(t *testing.T) {
	jailed(t)
	rep, code := doctorJSON(t, invocation{wrap: maskedProc}, "--profile", weakProfile(t))
	if code != 0 || !rep.OK {
		t.Errorf("doctor: exit %d, ok %v; want 0, true: %+v", code, rep.OK, rep)
	}
	for _, w := range []struct {
		name   string
		status doctor.Status
		detail string
	}{
		{doctor.CheckHostProc, doctor.Warn, "/proc/timer_list; the profile allows binding the existing /proc, so runs are degraded"},
		{doctor.CheckJail, doctor.Warn, "degraded: the existing /proc is bound instead of a fresh one, in agentjail's pid namespace"},
		{doctor.CheckInnerProc, doctor.Warn, "binding /proc instead, as Claude Code's weaker mode does, it works"},
		{doctor.CheckInnerUser, doctor.Pass, "works"},
		{doctor.CheckInnerNet, doctor.Pass, "works"},
	} {
		c := check(t, rep, w.name)
		if c.Status != w.status || !strings.Contains(c.Detail, w.detail) {
			t.Errorf("%s: %+v; want %s with %q", w.name, c, w.status, w.detail)
		}
		if c.Status == doctor.Warn && !strings.Contains(c.Fix, "systempaths=unconfined") {
			t.Errorf("%s names no fix for the container: %+v", w.name, c)
		}
	}
}

// TestDoctorBadInput: a flag or profile mistake is agentjail's bad-input
// exit, not a finding.
func TestDoctorBadInput(t *testing.T) {
	jailed(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"--profile", "tier9"}, `unknown profile "tier9"`},
		{[]string{"--user", "root"}, "uid 0 is allowed only with inner_sandbox: sealed"},
		{[]string{"--user", "nosuch-user"}, `run user "nosuch-user" (chosen by --user) does not exist`},
	} {
		r := aj(t, append([]string{"doctor"}, c.args...)...)
		if r.code != 125 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("doctor %q: exit %d, stderr %q, stdout %q", c.args, r.code, r.stderr, r.stdout)
		}
	}
}

// TestDoctorProbesTheRunUserOfHere: doctor probes as the user a run
// started in the current directory would get (the directory's owner),
// not as the nobody its own start directory, /, would give.
func TestDoctorProbesTheRunUserOfHere(t *testing.T) {
	jailed(t)
	owned := visibleDir(t) // owned by runUID
	r := invocation{dir: owned}.run(t, "doctor", "--json")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "jail starts as") || !strings.Contains(r.stdout, "(uid 1000)") {
		t.Errorf("doctor from a directory owned by uid 1000 did not probe as uid 1000:\n%s", r.stdout)
	}
}

// weakProfile writes, in a directory the jails can see, a profile that
// allows the /proc fallback (filesystem.proc: fresh-or-bind), and returns
// its path.
func weakProfile(t *testing.T) string {
	t.Helper()
	dir := visibleDir(t)
	write(t, dir, map[string]string{"weak.yaml": "extends: tier1\nfilesystem:\n  proc: fresh-or-bind\n"})
	return filepath.Join(dir, "weak.yaml")
}

// TestDoctorAgentSandboxes: doctor looks, inside the jail, for what the
// agents' own sandboxes need, and names what is missing and how to get
// it: socat hidden by the profile fails Claude Code's (with claude on the
// PATH), and with it the whole report (ok false, exit 1, text and JSON);
// without claude on the jail's PATH the same is a warning that still
// names the fix, and the report passes. A run user without a home on the
// host puts CODEX_HOME under /tmp, where Codex's sandbox on bubblewrap 0.8
// cannot make its helper, which fails Codex's (with codex on the PATH).
// Each passes otherwise.
func TestDoctorAgentSandboxes(t *testing.T) {
	jailed(t)
	const system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	claude, codex := filepath.Join(testutil.ClaudeDir(), "node_modules", ".bin"), filepath.Join(testutil.CodexDir(), "node_modules", ".bin")
	testutil.RequireClaude(t)
	testutil.RequireCodex(t)
	profiles := visibleDir(t)
	write(t, profiles, map[string]string{"nosocat.yaml": "extends: tier1\nfilesystem:\n  deny: [/usr/bin/socat]\n"})
	nosocat := filepath.Join(profiles, "nosocat.yaml")
	for _, c := range []struct {
		name, profile, user, path string
		claude, codex             doctor.Status
		ok                        bool
		want                      []string
	}{
		{"healthy", "tier1", "1000", claude + ":" + codex, doctor.Pass, doctor.Pass, true, []string{"finds bubblewrap and socat", "without --argv0: it runs its helper from CODEX_HOME, on the private home /home/"}},
		{"no socat", nosocat, "1000", claude + ":" + codex, doctor.Fail, doctor.Pass, false, []string{"fail  claude-sandbox", "lacks socat in the jail", "claude is at " + testutil.ClaudeDir(), "apt-get install socat", "1 failed"}},
		{"no socat, no claude", nosocat, "1000", codex, doctor.Warn, doctor.Pass, true, []string{"warn  claude-sandbox", "lacks socat in the jail (claude is not on the jail's PATH; one started by its full path needs it all the same)", "fix:   install socat where the jail sees it (apt-get install socat"}},
		{"no home", "tier1", "4242", claude + ":" + codex, doctor.Pass, doctor.Fail, false, []string{"fail  codex-sandbox", "home /tmp/home/4242 lies under the temporary directory", "codex is at " + testutil.CodexDir(), "create the run user's home directory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv := invocation{env: []string{"PATH=" + c.path + ":" + system}}
			code := map[bool]int{true: 0, false: 1}[c.ok]
			text := inv.run(t, "doctor", "--profile", c.profile, "--user", c.user)
			if text.code != code {
				t.Errorf("doctor exits %d, want %d", text.code, code)
			}
			for _, w := range c.want {
				if !strings.Contains(text.stdout, w) {
					t.Errorf("doctor lacks %q:\n%s", w, text.stdout)
				}
			}
			rep, _ := doctorJSON(t, inv, "--profile", c.profile, "--user", c.user)
			if rep.OK != c.ok {
				t.Errorf("doctor --json says ok %v, want %v", rep.OK, c.ok)
			}
			if got := check(t, rep, "claude-sandbox"); got.Status != c.claude {
				t.Errorf("claude-sandbox = %+v, want %s", got, c.claude)
			}
			if got := check(t, rep, "codex-sandbox"); got.Status != c.codex {
				t.Errorf("codex-sandbox = %+v, want %s", got, c.codex)
			}
		})
	}
}

package doctor

import (
	"path"
	"strings"
)

// The agents' own sandboxes need more than namespaces (innerChecks), and
// both fail quietly without it, so doctor looks for it where they will, in
// the jail:
//
//   - Claude Code's sandbox (sandbox.enabled) runs bubblewrap and socat,
//     which bridges its network proxy into the sandbox's namespace; without
//     either it refuses to start (sandbox.failIfUnavailable) or warns and
//     runs every command unsandboxed.
//   - Codex's sandbox runs the bubblewrap on the PATH, else the one it
//     bundles. A bubblewrap without --argv0 (before 0.9) makes it take its
//     compatibility path: it runs a helper it makes under CODEX_HOME, which
//     it refuses to make under the temporary directory (measured with Codex
//     0.169.0 on bubblewrap 0.8: every command then fails with "bwrap:
//     execvp codex-linux-sandbox: No such file or directory"). A run's
//     CODEX_HOME is ~/.codex on the private home, which lies under /tmp
//     when the run user has no home directory on the host.
//
// A missing prerequisite fails the check when the agent is on the jail's
// PATH, and is a warning otherwise (it will be needed once it is).

const (
	installSocat = "install socat where the jail sees it (apt-get install socat, dnf install socat, apk add socat)"
	installBwrap = "install bubblewrap where the jail sees it (apt-get install bubblewrap, dnf install bubblewrap)"
)

// agentCheck starts the check of an agent's sandbox: sealed and not-probed
// jails are judged the same for both agents; done says the check is
// complete.
func agentCheck(name, agent, probe string, j Jail) (c Check, found, done bool) {
	c = Check{Name: name, Status: Pass}
	p, ok := j.Probes[probe]
	found = ok && p.Exit == 0
	switch {
	case !j.Started:
		c.skip()
		return c, found, true
	case !ok:
		c.Status, c.Detail = Fail, "not probed: the probe script reported nothing for "+probe
		c.Cause, c.Fix = "the probe script did not run to its end in the jail", "run `agentjail run --profile "+j.Profile+" -- sh` and look for "+agent+"'s prerequisites by hand"
		return c, found, true
	case j.Sealed:
		c.Detail = agent + "'s own sandbox cannot start in the sealed profile, as intended: run it with its sandbox off"
		return c, found, true
	}
	return c, found, false
}

// missing makes c a failure when the agent is on the jail's PATH, a
// warning otherwise.
func missing(c *Check, found bool, agent, where string) {
	c.Status = Warn
	if found {
		c.Status = Fail
		c.Detail += " (" + agent + " is at " + where + ")"
	} else {
		c.Detail += " (" + agent + " is not on the jail's PATH; one started by its full path needs it all the same)"
	}
}

func claudeCheck(j Jail) Check {
	c, found, done := agentCheck(CheckClaude, "Claude Code", ProbeClaude, j)
	if done {
		return c
	}
	var lack, fixes []string
	if j.Probes[ProbeBwrap].Exit != 0 {
		lack, fixes = append(lack, "bubblewrap (bwrap)"), append(fixes, installBwrap)
	}
	if j.Probes[ProbeSocat].Exit != 0 {
		lack, fixes = append(lack, "socat"), append(fixes, installSocat)
	}
	if len(lack) == 0 {
		c.Detail = "Claude Code's sandbox finds bubblewrap and socat in the jail"
		return c
	}
	c.Detail = "Claude Code's sandbox lacks " + strings.Join(lack, " and ") + " in the jail"
	missing(&c, found, "claude", firstLine(j.Probes[ProbeClaude].Output))
	c.Cause = "Claude Code's sandbox (sandbox.enabled) runs bubblewrap, and socat to bridge its network proxy into the sandbox; without them it refuses to start (sandbox.failIfUnavailable) or runs every command unsandboxed"
	c.Fix = strings.Join(fixes, "; ") + "; a profile that denies or hides them must not"
	return c
}

func codexCheck(j Jail) Check {
	c, found, done := agentCheck(CheckCodex, "Codex", ProbeCodex, j)
	if done {
		return c
	}
	bw := j.Probes[ProbeBwrap]
	lines := strings.Split(strings.TrimSpace(bw.Output), "\n")
	home := strings.Split(strings.TrimSpace(j.Probes[ProbeHome].Output), "\n")
	switch {
	case bw.Exit != 0:
		c.Detail = "no bubblewrap on the jail's PATH: Codex's sandbox uses the bubblewrap it bundles"
	case j.Probes[ProbeArgv0].Exit == 0:
		c.Detail = "Codex's sandbox uses " + strings.Join(lines, ", ") + ", which has --argv0"
	case len(home) == 2 && underTemp(home[0]+"/.codex", home[1]):
		c.Detail = "Codex's sandbox uses " + strings.Join(lines, ", ") + ", without --argv0, and the jail's home " + home[0] + " lies under the temporary directory"
		missing(&c, found, "codex", firstLine(j.Probes[ProbeCodex].Output))
		c.Cause = "with a bubblewrap older than 0.9 Codex runs a helper it makes under CODEX_HOME (~/.codex), and refuses to make it under the temporary directory: every command then fails (bwrap: execvp codex-linux-sandbox: No such file or directory); the jail's home is under /tmp because the run user " + j.User + " has no home directory on the host"
		c.Fix = "create the run user's home directory on the host (mkdir -p and chown it to the user; useradd -m), or install bubblewrap >= 0.9, which has --argv0"
	default:
		c.Detail = "Codex's sandbox uses " + strings.Join(lines, ", ") + ", without --argv0: it runs its helper from CODEX_HOME, on the private home " + home[0] + ", as it needs"
	}
	return c
}

// underTemp reports whether p lies under tmp or /tmp (Rust's
// std::env::temp_dir: $TMPDIR, else /tmp).
func underTemp(p, tmp string) bool {
	for _, t := range []string{tmp, "/tmp"} {
		if t = path.Clean(t); t != "" && strings.HasPrefix(p, t+"/") {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

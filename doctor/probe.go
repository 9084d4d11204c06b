package doctor

import (
	"strconv"
	"strings"
)

// Probe names, as Script reports them.
const (
	ProbeUserns = "userns" // unshare -Ur true
	ProbeProc   = "proc"   // the agent's own bwrap with a fresh /proc
	ProbeWeak   = "weak"   // the agent's own bwrap binding /proc (Claude Code's weaker mode)
	ProbeNet    = "net"    // loopback up in a new network namespace
	ProbeBroker = "broker" // a request from a proxy jail to agentjail's broker
	// What the agents' own sandboxes need (agents.go).
	ProbeClaude = "claude" // command -v claude: is Claude Code on the jail's PATH
	ProbeCodex  = "codex"  // command -v codex
	ProbeBwrap  = "bwrap"  // command -v bwrap, and its version
	ProbeArgv0  = "argv0"  // the jail's bwrap has --argv0 (bubblewrap >= 0.9)
	ProbeSocat  = "socat"  // socat -V runs
	ProbeHome   = "home"   // $HOME and the temporary directory, a line each
)

// Script is run by sh inside the profile's jail, as the run user. It tries
// what the agent's own sandbox does (the commands of the matrix in
// docs/nesting.md, What was measured) and reports each probe as its output
// followed by "@@probe NAME EXIT".
//
// Output goes through a file, not a pipe or a command substitution: a
// bwrap whose parent dies early leaves its cloned child blocked for ever,
// and that child must not hold the jail's stdout open. timeout(1), where
// present, ends a probe that hangs itself.
const Script = `t=
command -v timeout >/dev/null 2>&1 && t="timeout 20"
d=$(mktemp -d 2>/dev/null) || d=
probe() {
	name=$1; shift
	if [ -n "$d" ]; then
		$t "$@" >"$d/out" 2>&1 </dev/null; rc=$?
		cat "$d/out"
	else
		$t "$@" 2>&1 </dev/null; rc=$?
	fi
	echo "@@probe $name $rc"
}
probe userns unshare -Ur true
probe proc bwrap --ro-bind / / --unshare-user --unshare-pid --unshare-net --proc /proc --dev /dev true
probe weak bwrap --ro-bind / / --unshare-user --unshare-pid --bind /proc /proc --dev /dev true
if command -v ip >/dev/null 2>&1; then
	probe net unshare -Urn ip link set lo up
else
	probe net bwrap --ro-bind / / --unshare-user --unshare-net --dev /dev true
fi
probe claude sh -c 'command -v claude'
probe codex sh -c 'command -v codex'
probe bwrap sh -c 'command -v bwrap && bwrap --version'
probe argv0 sh -c 'bwrap --help 2>&1 | grep -q -- --argv0'
probe socat socat -V
probe home sh -c 'printf "%s\n%s\n" "$HOME" "${TMPDIR:-/tmp}"'
if [ -n "${HTTP_PROXY:-}" ]; then
	probe broker curl -sS -m 10 --noproxy '*' "$HTTP_PROXY/agentjail/ping"
fi
[ -z "$d" ] || rm -rf "$d"
`

// Probe is one probe's result.
type Probe struct {
	Exit   int
	Output string
}

// ParseProbes reads Script's output. Probes that did not report are
// missing from the map.
func ParseProbes(out string) map[string]Probe {
	probes := map[string]Probe{}
	var body []string
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "@@probe ")
		if !ok {
			if line != "" {
				body = append(body, line)
			}
			continue
		}
		if f := strings.Fields(rest); len(f) == 2 {
			if code, err := strconv.Atoi(f[1]); err == nil {
				probes[f[0]] = Probe{Exit: code, Output: strings.Join(body, "\n")}
			}
		}
		body = nil
	}
	return probes
}

// Jail is what cmd/agentjail learned by launching the profile's jail with
// Script as the agent.
type Jail struct {
	Profile string
	Sealed  bool   // inner_sandbox: sealed: the inner probes must fail
	User    string // the run user, "nobody (uid 65534)"
	// Covers is what keeps a fresh /proc from being mounted, from the
	// host's mount table (procs.ProcCovers); nil when nothing does.
	Covers []string
	// Fallback: the profile allows binding the existing /proc
	// (filesystem.proc: fresh-or-bind).
	Fallback bool
	// Degraded: the jail was launched with the existing /proc bound.
	Degraded bool
	// Err is why the profile could not be turned into a jail at all (a
	// bad profile, bwrap missing); nothing was launched.
	Err error
	// Started: the jail ran Script to its end. Otherwise Stderr holds what
	// bwrap (or the exec stage) said.
	Started bool
	Stderr  string
	Probes  map[string]Probe
	// NetMode is the profile's network.mode; Broker, in proxy mode, the
	// address the broker served in the jail ("" when no listener reached
	// it).
	NetMode, Broker string
}

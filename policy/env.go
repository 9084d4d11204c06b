package policy

import (
	"maps"
	"slices"
	"strings"
)

// AlwaysUnset are removed from every jail's environment: what Claude Code
// gives the commands it runs (its Bash tool, hooks, MCP servers) to say
// they run inside a session of its own, which passes the CLAUDE_CODE_*
// allowlist, but describes the session agentjail was started from, not
// the jail's. Claude Code itself deletes CLAUDECODE,
// CLAUDE_CODE_SESSION_ID and CLAUDE_CODE_CHILD_SESSION when it starts a
// fresh top-level session. Measured with 2.1.197: CLAUDECODE is harmless
// (no nesting guard: --print and the interactive CLI both start with it);
// CLAUDE_CODE_CHILD_SESSION=1 makes an interactive claude write no
// transcript, so the session could never be resumed; ENTRYPOINT and
// EXECPATH name the outer process (sdk-cli, a host path).
var AlwaysUnset = []string{
	"CLAUDECODE",
	"CLAUDE_CODE_CHILD_SESSION",
	"CLAUDE_CODE_SESSION_ID",
	"CLAUDE_CODE_ENTRYPOINT",
	"CLAUDE_CODE_EXECPATH",
}

// Allows reports whether name passes the allowlist.
func (e Environment) Allows(name string) bool {
	for _, a := range e.Allow {
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(name, prefix) || a == name {
			return true
		}
	}
	return false
}

// Apply builds the jail's environment from the caller's: allowlisted
// variables, then defaults (HOME, USER, ... of the run user), then the
// policy's set, minus unset and AlwaysUnset, then forced (agentjail's own
// markers, which nothing removes). The result is sorted.
func (e Environment) Apply(environ []string, defaults, forced map[string]string) []string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && e.Allows(k) {
			env[k] = v
		}
	}
	for k, v := range defaults {
		env[k] = v
	}
	for k, v := range e.Set {
		env[k] = v
	}
	for _, k := range slices.Concat(e.Unset, AlwaysUnset) {
		delete(env, k)
	}
	for k, v := range forced {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

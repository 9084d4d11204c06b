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
// fresh top-level session. Measured jailed with 2.1.197
// (TestClaudeNestedSessionVariables): CLAUDE_CODE_CHILD_SESSION=1 makes an
// interactive claude write no transcript, so the session could never be
// resumed; CLAUDECODE=1 changes nothing there, but the releases from 2.1.39
// that had a nesting guard refuse to start with it
// (anthropics/claude-code#25434); ENTRYPOINT and EXECPATH name the outer
// process (sdk-cli, a host path).
var AlwaysUnset = []string{
	"CLAUDECODE",
	"CLAUDE_CODE_CHILD_SESSION",
	"CLAUDE_CODE_SESSION_ID",
	"CLAUDE_CODE_ENTRYPOINT",
	"CLAUDE_CODE_EXECPATH",
}

// Allows reports whether name passes the allowlist. A prefix (OTEL_*)
// never passes a credential of the host's (IsHostCredential): only its
// exact name does.
func (e Environment) Allows(name string) bool {
	for _, a := range e.Allow {
		if a == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(name, prefix) && !IsHostCredential(name) {
			return true
		}
	}
	return false
}

// hostCredentials are variables that carry a credential of the machine or
// the CI job agentjail runs in, not of the agent: tokens that act for the
// repository or the job (GitHub Actions, GitLab CI, Buildkite), the
// requests for an OIDC identity token, a telemetry exporter's
// authorization headers, the operator's ssh agent.
var hostCredentials = []string{
	"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
	"ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
	"CI_JOB_TOKEN", "CI_JOB_JWT", "CI_JOB_JWT_V1", "CI_JOB_JWT_V2", "CI_REGISTRY_PASSWORD", "CI_DEPLOY_PASSWORD",
	"BUILDKITE_AGENT_ACCESS_TOKEN",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
	"SSH_AUTH_SOCK",
}

// IsHostCredential reports whether name carries a credential of the host
// or its CI job (hostCredentials, and any OTEL_..._HEADERS): a profile's
// prefix never passes one into a jail.
func IsHostCredential(name string) bool {
	return slices.Contains(hostCredentials, name) || strings.HasPrefix(name, "OTEL_") && strings.HasSuffix(name, "_HEADERS")
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

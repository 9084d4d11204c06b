package policy

import (
	"os"
	"slices"
	"testing"
)

func TestEnvironmentApply(t *testing.T) {
	t.Parallel()
	e := Environment{
		Allow: []string{"PATH", "LC_*", "ANTHROPIC_*", "CLAUDECODE", "CLAUDE_CODE_*", "HOME"},
		Set:   map[string]string{"TMPDIR": "/tmp", "EXTRA": "1"},
		Unset: []string{"ANTHROPIC_LOG"},
	}
	got := e.Apply(
		[]string{"PATH=/bin", "LC_ALL=C", "LCX=no", "ANTHROPIC_API_KEY=sk", "ANTHROPIC_LOG=debug", "AWS_SECRET=x", "CLAUDECODE=1", "CLAUDE_CODE_CHILD_SESSION=1", "CLAUDE_CODE_SESSION_ID=s", "CLAUDE_CODE_ENTRYPOINT=sdk-cli", "CLAUDE_CODE_EXECPATH=/x", "CLAUDE_CODE_OAUTH_TOKEN=t", "HOME=/root", "AGENTJAIL_RUN=spoofed", "BROKEN"},
		map[string]string{"HOME": "/home/agent", "USER": "agent"},
		map[string]string{"AGENTJAIL_RUN": "r1"},
	)
	want := []string{"AGENTJAIL_RUN=r1", "ANTHROPIC_API_KEY=sk", "CLAUDE_CODE_OAUTH_TOKEN=t", "EXTRA=1", "HOME=/home/agent", "LC_ALL=C", "PATH=/bin", "TMPDIR=/tmp", "USER=agent"}
	if !slices.Equal(got, want) {
		t.Errorf("Apply =\n %q\nwant\n %q", got, want)
	}
}

// TestHostCredentialsNeedTheirExactName: a prefix in an allowlist never
// passes a credential of the host or its CI job; naming it exactly does.
func TestHostCredentialsNeedTheirExactName(t *testing.T) {
	t.Parallel()
	e := Environment{Allow: []string{"GITHUB_*", "GH_*", "ACTIONS_*", "CI_*", "OTEL_*", "SSH_*", "BUILDKITE_*", "GH_TOKEN"}}
	got := e.Apply([]string{
		"GITHUB_TOKEN=t", "GITHUB_SHA=abc", "GH_TOKEN=g", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=r", "ACTIONS_ID_TOKEN_REQUEST_URL=u",
		"ACTIONS_RUNTIME_TOKEN=a", "CI_JOB_TOKEN=j", "CI_JOB_JWT_V2=w", "CI_PIPELINE_ID=7", "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer x",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS=k=v", "OTEL_SERVICE_NAME=svc", "SSH_AUTH_SOCK=/run/ssh", "BUILDKITE_AGENT_ACCESS_TOKEN=b",
	}, nil, nil)
	want := []string{"CI_PIPELINE_ID=7", "GH_TOKEN=g", "GITHUB_SHA=abc", "OTEL_SERVICE_NAME=svc"}
	if !slices.Equal(got, want) {
		t.Errorf("Apply =\n %q\nwant\n %q", got, want)
	}
}

// TestBuiltinEnvironment: what every built-in profile passes of the
// caller's environment, and what it never passes.
func TestBuiltinEnvironment(t *testing.T) {
	t.Parallel()
	l := Loader{Builtins: os.DirFS("../profiles")}
	passes := []string{"PATH", "LANG", "LC_ALL", "TERM", "TZ", "CI", "TRACEPARENT", "TRACESTATE", "OTEL_SERVICE_NAME",
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_EXPORTER",
		"ANTHROPIC_API_KEY", "CLAUDE_CODE_USE_BEDROCK", "OPENAI_API_KEY", "HTTPS_PROXY", "SSL_CERT_FILE"}
	never := append(slices.Clone(hostCredentials), "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "VAULT_TOKEN", "NPM_TOKEN", "KUBECONFIG",
		"DOCKER_AUTH_CONFIG", "GITHUB_SHA", "CLAUDECODE", "LD_PRELOAD", "HOME", "SUDO_USER")
	for _, name := range l.BuiltinNames() {
		p, err := l.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range passes {
			if !p.Environment.Allows(v) {
				t.Errorf("%s does not pass %s", name, v)
			}
		}
		for _, v := range never {
			if p.Environment.Allows(v) && !slices.Contains(p.Environment.Unset, v) {
				t.Errorf("%s passes %s", name, v)
			}
		}
	}
}

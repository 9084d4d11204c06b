package policy

import (
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

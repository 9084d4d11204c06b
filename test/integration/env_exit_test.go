package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnvironmentIsAllowlistedAndNeverOnTheCommandLine(t *testing.T) {
	jailed(t)
	const secret = "sk-ant-integration-secret-value"
	ready := filepath.Join(workspace(t), "ready")
	// The host's network: a proxy jail gets placeholders for the agents' keys.
	cmd := exec.Command(agentjail, "run", "--net", "host", "--write", filepath.Dir(ready), "--chdir", filepath.Dir(ready), "--", "sh", "-c", "env; touch "+ready+"; sleep 30")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=" + secret, "AWS_SECRET_ACCESS_KEY=aws-secret", "CLAUDECODE=1", "DATABASE_URL=postgres://x", "LANG=C.UTF-8",
		// An enclosing Claude Code session's and Codex's own.
		"CLAUDE_CODE_CHILD_SESSION=1", "CLAUDE_CODE_SESSION_ID=outer", "CLAUDE_CODE_ENTRYPOINT=sdk-cli", "CLAUDE_CODE_EXECPATH=/opt/claude",
		"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x", "CODEX_HOME=/root/.codex", "CODEX_REFRESH_TOKEN_URL_OVERRIDE=http://x", "CODEX_THREAD_ID=t", "CODEX_API_KEY=sk-codex"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	waitFor(t, func() bool {
		select {
		case <-exited:
			t.Fatalf("agentjail exited early:\n%s", errOut.String())
		default:
		}
		_, err := os.Stat(ready)
		return err == nil
	})

	// Every process's command line, bwrap's included, is readable by every
	// local user: no value may appear in any of them.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	sawBwrap := false
	for _, f := range procs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.Contains(string(data), ready) && strings.HasPrefix(filepath.Base(strings.Split(string(data), "\x00")[0]), "bwrap") {
			sawBwrap = true
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s shows the secret: %q", f, data)
		}
	}
	if !sawBwrap {
		t.Error("found no bwrap process to inspect")
	}
	cmd.Process.Kill()
	<-exited

	env := out.String()
	if !strings.Contains(env, "ANTHROPIC_API_KEY="+secret) {
		t.Errorf("an allowlisted variable did not pass:\n%s", env)
	}
	for _, gone := range []string{"AWS_SECRET_ACCESS_KEY", "CLAUDECODE", "DATABASE_URL", "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_CODE_SESSION_ID",
		"CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_EXECPATH", "CODEX_HOME=/root", "CODEX_REFRESH_TOKEN_URL_OVERRIDE", "CODEX_THREAD_ID"} {
		if !strings.Contains(gone, "=") {
			gone += "="
		}
		if strings.Contains(env, gone) {
			t.Errorf("%s reached the jail:\n%s", gone, env)
		}
	}
	for _, want := range []string{"AGENTJAIL_RUN=", "HOME=", "PATH=/usr/bin:/bin", "TMPDIR=/tmp", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-x", "CODEX_API_KEY=sk-codex"} {
		if !strings.Contains(env, want) {
			t.Errorf("the jail's environment lacks %s:\n%s", want, env)
		}
	}
}

func TestExitCodesPassThrough(t *testing.T) {
	jailed(t)
	p := workspace(t)
	write(t, p, map[string]string{"notexec.sh": "#!/bin/sh\nexit 0\n"})
	for _, c := range []struct {
		name string
		argv []string
		code int
		msg  string
	}{
		{"zero", []string{"true"}, 0, ""},
		{"seven", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"255", []string{"sh", "-c", "exit 255"}, 255, ""},
		{"not found", []string{"no-such-command-anywhere"}, 127, "cannot execute no-such-command-anywhere inside the jail: no such file or directory"},
		{"absent path", []string{p + "/missing"}, 127, "no such file or directory"},
		{"not executable", []string{p + "/notexec.sh"}, 126, "permission denied"},
		{"a directory", []string{"/etc"}, 126, "permission denied"},
		{"SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"SIGSEGV", []string{"sh", "-c", "kill -SEGV $$"}, 128 + 11, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := aj(t, append([]string{"run", "--write", p, "--chdir", p, "--"}, c.argv...)...)
			wantCode(t, r, c.code)
			if c.msg != "" && !strings.Contains(r.stderr, c.msg) {
				t.Errorf("stderr lacks %q:\n%s", c.msg, r.stderr)
			}
		})
	}
}

func TestStdioPassesThrough(t *testing.T) {
	jailed(t)
	r := invocation{stdin: "line one\nline two\n"}.run(t, "run", "--", "sh", "-c", "tr a-z A-Z; echo to-stderr >&2")
	wantCode(t, r, 0)
	if r.stdout != "LINE ONE\nLINE TWO\n" || !strings.Contains(r.stderr, "to-stderr") {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestEnvironmentDefaults: what the jail gets of the caller's environment
// by default: CI and tracing settings pass, credentials of the host or
// its CI job never (policy.IsHostCredential), not even through a
// profile's prefix; naming one exactly passes it.
func TestEnvironmentDefaults(t *testing.T) {
	jailed(t)
	env := []string{"CI=true", "TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "OTEL_SERVICE_NAME=ops",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer otel-secret",
		"GITHUB_TOKEN=ghs_secret", "GITHUB_SHA=abc123", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=oidc-secret", "ACTIONS_ID_TOKEN_REQUEST_URL=https://oidc",
		"CI_JOB_TOKEN=gl-secret", "SSH_AUTH_SOCK=/run/ssh.sock"}
	dir := visibleDir(t)
	write(t, dir, map[string]string{"gh.yaml": "extends: tier1\nenvironment:\n  allow: [GITHUB_*, ACTIONS_*, CI_*, SSH_*]\n"})
	for _, c := range []struct {
		name      string
		args      []string
		pass, not []string
	}{
		{"tier1", nil, []string{"CI=true", "TRACEPARENT=00-", "OTEL_SERVICE_NAME=ops", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318"},
			[]string{"otel-secret", "ghs_secret", "GITHUB_SHA", "oidc", "gl-secret", "SSH_AUTH_SOCK"}},
		{"prefixes in a profile", []string{"--profile", filepath.Join(dir, "gh.yaml")}, []string{"GITHUB_SHA=abc123"},
			[]string{"otel-secret", "ghs_secret", "oidc", "gl-secret", "SSH_AUTH_SOCK"}},
		{"named on the command line", []string{"--env", "GITHUB_TOKEN"}, []string{"GITHUB_TOKEN=ghs_secret"}, []string{"oidc", "otel-secret"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := invocation{env: env}.run(t, append(append([]string{"run"}, c.args...), "--", "env")...)
			wantCode(t, r, 0)
			for _, want := range c.pass {
				if !strings.Contains(r.stdout, "\n"+want) && !strings.HasPrefix(r.stdout, want) {
					t.Errorf("the jail lacks %s:\n%s", want, r.stdout)
				}
			}
			for _, bad := range c.not {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("the jail got %s:\n%s", bad, r.stdout)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/mounts"
)

// agentjailRun calls run in-process and returns stdout, stderr, exit code.
func agentjailRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"agentjail"}, args...), strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestRenderLine(t *testing.T) {
	testutil.RequireBwrap(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret-value")
	out, errOut, code := agentjailRun(t, "render", "--chdir", "/", "--env", "EXTRA=also-secret", "--", "sh", "-c", "echo 'quoted arg'")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
		lines = lines[1:] // the header: TestRenderedLineRuns follows it
	}
	if len(lines) != 3 {
		t.Fatalf("want the header, the command line, the fd comment and the env comment:\n%s", out)
	}
	for _, want := range []string{"--json-status-fd '<fd:status>'", "--report-fd '<fd:exec-report>'", "-- sh -c 'echo '\\''quoted arg'\\'''"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("command line lacks %s:\n%s", want, lines[0])
		}
	}
	// tier1's built-in seccomp filter is passed as a file descriptor too.
	if !strings.HasPrefix(lines[1], "# fds: --json-status-fd '<fd:status>', --block-fd '<fd:block>', --add-seccomp-fd '<fd:seccomp-0>', --report-fd '<fd:exec-report>'") {
		t.Errorf("fd comment: %s", lines[1])
	}
	if !strings.HasPrefix(lines[2], "# env: ") || !strings.Contains(lines[2], " ANTHROPIC_API_KEY ") || !strings.Contains(lines[2], " EXTRA ") {
		t.Errorf("env comment: %s", lines[2])
	}
	if strings.Contains(out, "sk-secret-value") || strings.Contains(out, "also-secret") {
		t.Errorf("render prints an environment value:\n%s", out)
	}
}

// renderedLine is the command line in render's output: the first line
// that is not a comment.
func renderedLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// TestDoubleDashIsKept: urfave/cli v3 drops a "--" that follows the
// command name; agentjail puts it back.
func TestDoubleDashIsKept(t *testing.T) {
	testutil.RequireBwrap(t)
	for _, args := range [][]string{
		{"render", "--chdir", "/", "sh", "--", "x"},
		{"render", "--chdir", "/", "--", "sh", "--", "x"},
	} {
		out, errOut, code := agentjailRun(t, args...)
		if line := renderedLine(out); code != 0 || !strings.HasSuffix(line, " -- sh -- x") {
			t.Errorf("%q: exit %d, line %s %s", args, code, line, errOut)
		}
	}
	// A comma in a path must not split it.
	out, errOut, code := agentjailRun(t, "render", "--chdir", "/", "--read", "/a,b", "--", "true")
	if code != 0 || strings.Contains(out, "--ro-bind-try /a ") {
		t.Errorf("--read /a,b: exit %d %s %s", code, out, errOut)
	}
}

func TestProfilesSchemaVersion(t *testing.T) {
	out, _, code := agentjailRun(t, "profiles")
	if code != 0 || !strings.Contains(out, "tier1   observe-only") || strings.Contains(out, "_base") {
		t.Errorf("profiles: %d\n%s", code, out)
	}
	out, _, code = agentjailRun(t, "profiles", "show", "tier3")
	if code != 0 || !strings.Contains(out, "credentials:") || !strings.Contains(out, "wall: 1h0m0s") || strings.Contains(out, "extends:") || !strings.Contains(out, "network:\n  mode: host\n") {
		t.Errorf("profiles show tier3: %d\n%s", code, out)
	}
	_, errOut, code := agentjailRun(t, "profiles", "show", "nope")
	if code != 125 || !strings.Contains(errOut, `unknown profile "nope"`) {
		t.Errorf("profiles show nope: %d %s", code, errOut)
	}
	_, errOut, code = agentjailRun(t, "profiles", "show", "tier1", "tier2")
	if code != 125 || !strings.Contains(errOut, "`agentjail profiles show` shows one profile, and got 2 (tier1, tier2): run it once for each") {
		t.Errorf("profiles show tier1 tier2: %d %s", code, errOut)
	}
	out, _, code = agentjailRun(t, "schema")
	var schema map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &schema) != nil || schema["title"] != "agentjail profile" {
		t.Errorf("schema: %d\n%.200s", code, out)
	}
	out, _, code = agentjailRun(t, "version")
	if code != 0 || !strings.HasPrefix(out, "agentjail dev") || !strings.Contains(out, "bubblewrap") {
		t.Errorf("version: %d\n%s", code, out)
	}
}

func TestHelpGoesToStdoutAndUsageErrorsToStderr(t *testing.T) {
	out, errOut, code := agentjailRun(t, "run", "--help")
	if code != 0 || !strings.Contains(out, "--idle-timeout") || errOut != "" {
		t.Errorf("run --help: %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = agentjailRun(t, "render", "--user")
	if code != 125 || out != "" || !strings.Contains(errOut, "flag needs an argument") {
		t.Errorf("render --user: %d stdout %q stderr %q", code, out, errOut)
	}
}

// TestRenderHeader: the header names as whom to run the line and every
// path the line needs that only a run makes: the empty file, the homes
// directory, its directories and credential copies (of a Claude Code
// login, the part a run gets), and the placeholders bwrap leaves on the
// host. TestRenderedLineRuns runs a line by it.
func TestRenderHeader(t *testing.T) {
	t.Parallel()
	j := &launch.Jail{
		RunID: "<run-id>",
		User:  mounts.User{UID: 1000, GID: 1001, Name: "agent", Groups: []int{4, 27}, Why: "--user"},
		Plan: mounts.Plan{
			Masks: []string{"/w/.env", "/w/a b"},
			Dirs:  []mounts.Dir{{Path: launch.AgentHomesDir("<run-id>") + "/claude", Size: 512}},
			Copies: []mounts.Copy{
				{Src: "/root/.ssh", Dst: launch.AgentHomesDir("<run-id>") + "/credentials/.ssh"},
				{Src: "/root/.claude/.credentials.json", Dst: launch.AgentHomesDir("<run-id>") + "/claude/.credentials.json"},
			},
			Claude: &mounts.ClaudeHome{Dir: launch.AgentHomesDir("<run-id>") + "/claude", Credentials: "/root/.claude/.credentials.json"},
		},
	}
	got := renderHeader(j)
	want := []string{
		"#   " + launch.EmptyFile() + ": an empty file every user can read (mode 0444), the source of every mask\n",
		"#   '" + launch.AgentHomesDir("<run-id>") + "': a directory the run user can traverse (mode 0711)\n",
		"#   '" + launch.AgentHomesDir("<run-id>") + "/claude': a directory owned by uid 1000 gid 1001, mode 0700 (run as root mounts a tmpfs of 512 bytes there)\n",
		"#   '" + launch.AgentHomesDir("<run-id>") + "/credentials/.ssh': a copy of /root/.ssh owned by uid 1000 gid 1001 (files 0600, directories 0700)\n",
		"#   '" + launch.AgentHomesDir("<run-id>") + "/claude/.credentials.json': the login of /root/.claude/.credentials.json without its refresh token (only claudeAiOauth's accessToken, expiresAt, scopes, subscriptionType, rateLimitTier) owned by uid 1000 gid 1001 (files 0600, directories 0700)\n",
		"remove them after running this line:\n#   /w/.env '/w/a b'\n",
	}
	if os.Getuid() == 0 {
		want = append(want, "# Run this line as the run user, uid 1000 gid 1001 (agent; --user), never as root: prefix it with\n#   setpriv --reuid=1000 --regid=1001 --groups=4,27 --\n")
	} else {
		want = append(want, "# Run this line as yourself (uid 1000 gid 1001)")
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the header lacks %q:\n%s", w, got)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !strings.HasPrefix(l, "# ") {
			t.Errorf("a header line is not a comment: %q", l)
		}
	}
}

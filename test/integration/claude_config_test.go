package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
)

// operatorClaude makes an operator home (root's) whose ~/.claude holds
// files (path -> content below ~/.claude).
func operatorClaude(t *testing.T, files map[string]string) string {
	t.Helper()
	home := visibleDir(t)
	for name, content := range files {
		p := filepath.Join(home, ".claude", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, home, 0)
	return home
}

// hookSettings are settings with a PreToolUse hook that, before every Bash
// call, leaves marker behind.
func hookSettings(marker string) map[string]any {
	return map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{
		"matcher": "Bash", "hooks": []any{map[string]any{"type": "command", "command": "touch " + marker}}}}}}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClaudeOperatorSettings: the operator's ~/.claude/settings.json is in
// effect inside: its permissions let Bash run without --allowedTools, its
// sandbox is on (the command gets a network namespace of its own and cannot
// write the home, which the jail leaves writable); its dangerous keys are
// not carried (the hook does not run, the env value is not set, the key
// helper is not asked) and the record says which were left out. CLAUDE.md,
// commands, agents and skills reach the model. Without the settings (the
// hook given with --settings instead), the hook runs, the sandbox is off
// and the home is writable: the checks above can fail.
func TestClaudeOperatorSettings(t *testing.T) {
	jailed(t)
	probe := `readlink /proc/self/ns/net; echo "env=[$FROM_SETTINGS]"; (echo x > ~/outside.txt) 2>&1; (echo '{}' > "$CLAUDE_CONFIG_DIR/settings.json") 2>&1; echo ok > inner.txt`
	t.Run("carried", func(t *testing.T) {
		t.Parallel()
		dir := visibleDir(t)
		marker := filepath.Join(dir, "hook-ran")
		settings := hookSettings(marker)
		settings["permissions"] = map[string]any{"allow": []string{"Bash"}}
		settings["sandbox"] = map[string]any{"enabled": true, "failIfUnavailable": true, "allowUnsandboxedCommands": false}
		settings["env"] = map[string]string{"FROM_SETTINGS": "leaked"}
		settings["apiKeyHelper"] = "echo sk-ant-from-helper"
		home := operatorClaude(t, map[string]string{
			"settings.json":            jsonOf(t, settings),
			"CLAUDE.md":                "Always answer with CLAUDE-MD-MARKER.\n",
			"commands/opscheck.md":     "---\ndescription: COMMAND-MARKER checks\n---\nCheck.\n",
			"agents/opsagent.md":       "---\nname: opsagent\ndescription: AGENT-MARKER helps\n---\nHelp.\n",
			"skills/opsskill/SKILL.md": "---\nname: opsskill\ndescription: SKILL-MARKER does\n---\nDo.\n",
		})
		srv := fakeapi.New(t, fakeapi.Tool("Bash", map[string]any{"command": probe, "description": "probe"}), fakeapi.Text("done"))
		r, rec := claudeJail{profile: "tier1", dir: dir, home: home, before: saveJailNet}.run(t, srv, "--print", "--output-format", "json", "probe")
		wantCode(t, r, 0)
		tr := srv.ToolResults()
		if len(tr) != 1 {
			t.Fatalf("tool results %+v", tr)
		}
		out := tr[0].Content
		if strings.Contains(out, "requires approval") || strings.Contains(out, "permission") {
			t.Fatalf("the operator's permissions are not in effect: %+v", tr)
		}
		if inner := strings.SplitN(out, "\n", 2)[0]; !strings.HasPrefix(inner, "net:[") || inner == jailNet(t, dir) {
			t.Errorf("the command runs in the jail's network namespace (%s): the operator's sandbox.enabled is not in effect:\n%s", jailNet(t, dir), out)
		}
		if !strings.Contains(out, "env=[]") {
			t.Errorf("the settings' env is set:\n%s", out)
		}
		for _, file := range []string{"/outside.txt", "/.claude/settings.json"} {
			if !readOnly(out, file) {
				t.Errorf("the tool's output does not say %s is on a read-only file system:\n%s", file, out)
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "inner.txt")); err != nil || string(b) != "ok\n" {
			t.Errorf("the sandboxed command could not write its working directory: %q %v", b, err)
		}
		if fileExists(marker) {
			t.Error("the operator's hook ran in the jail")
		}
		var bodies strings.Builder
		for _, q := range srv.Requests() {
			if q.Method == http.MethodPost && strings.HasPrefix(q.Path, "/v1/messages") {
				bodies.Write(q.Body)
				if k := q.Header.Get("X-Api-Key"); k != "sk-ant-fakeapi-0000" {
					t.Errorf("x-api-key %q: not the environment's key", k)
				}
			}
		}
		for _, m := range []string{"CLAUDE-MD-MARKER", "COMMAND-MARKER", "AGENT-MARKER", "SKILL-MARKER"} {
			if !strings.Contains(bodies.String(), m) {
				t.Errorf("%s did not reach the model", m)
			}
		}
		src := filepath.Join(home, ".claude", "settings.json")
		want := src + ": carried in without apiKeyHelper, env, hooks ("
		if !slices.ContainsFunc(rec.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) || !strings.Contains(r.stderr, "agentjail: warning: "+want) {
			t.Errorf("no warning %q: %q\n%s", want, rec.Warnings, r.stderr)
		}
	})
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		dir := visibleDir(t)
		marker := filepath.Join(dir, "hook-ran")
		srv := fakeapi.New(t, fakeapi.Tool("Bash", map[string]any{"command": probe, "description": "probe"}), fakeapi.Text("done"))
		r, _ := claudeJail{profile: "tier1", dir: dir, before: saveJailNet}.run(t, srv, "--settings", jsonOf(t, hookSettings(marker)), "--allowedTools=Bash", "--print", "--output-format", "json", "probe")
		wantCode(t, r, 0)
		tr := srv.ToolResults()
		if len(tr) != 1 || !strings.HasPrefix(tr[0].Content, jailNet(t, dir)+"\n") || readOnly(tr[0].Content, "/outside.txt") {
			t.Errorf("without the operator's settings, no sandbox: %+v", tr)
		}
		if !fileExists(marker) {
			t.Error("a hook in effect did not run: the check that the operator's hook does not run cannot fail")
		}
	})
}

// readOnly reports whether a shell's output has a line saying that writing
// file failed on a read-only file system, as bash ("FILE: Read-only file
// system") or zsh ("read-only file system: FILE") words it: claude runs
// its Bash tool in zsh where it is installed.
func readOnly(out, file string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, file) && strings.Contains(strings.ToLower(l), "read-only file system") {
			return true
		}
	}
	return false
}

// TestClaudeResume: with --claude-dir DIR, a second run resumes the first
// run's session (--resume ID, then --continue): the model is sent the
// first run's turn again, under the same session id. Only the sessions
// persist: settings the first run wrote into its Claude directory, with a
// hook, and settings put into DIR itself, are not in effect in the second
// (the hook would run before its Bash call). DIR is root's, 0700, its
// projects the run user's; a run without --claude-dir cannot read it.
// --results copies each run's own transcripts only.
func TestClaudeResume(t *testing.T) {
	jailed(t)
	dir, results := visibleDir(t), filepath.Join(visibleDir(t), "results")
	// Where every jail sees it (not under /tmp), in a directory of root's.
	parent, err := os.MkdirTemp("/var/lib", "agentjail-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o755)
	sessions := filepath.Join(parent, "claude-sessions")
	marker := filepath.Join(dir, "hook-ran")
	flags := []string{"--claude-dir", sessions, "--results", results}

	plant := fmt.Sprintf(`printf '%%s' %s > "$CLAUDE_CONFIG_DIR/settings.json" && printf 'Say PLANTED-%%s.\n' MD > "$CLAUDE_CONFIG_DIR/CLAUDE.md" && echo planted`, shellWord(jsonOf(t, hookSettings(marker))))
	srv := fakeapi.New(t, fakeapi.Tool("Bash", map[string]any{"command": plant, "description": "plant"}), fakeapi.Text("noted"))
	cj := claudeJail{profile: "tier1", dir: dir, flags: flags, env: []string{"CLAUDE_CODE_CHILD_SESSION=1"}}
	r, rec := cj.run(t, srv, "--allowedTools=Bash", "--print", "--output-format", "json", "remember-token-XYZ")
	wantCode(t, r, 0)
	if tr := srv.ToolResults(); len(tr) != 1 || tr[0].IsError || !strings.Contains(tr[0].Content, "planted") {
		t.Fatalf("run 1 could not write its Claude directory (conversation lengths asked: %s): %+v", srv.Turns(), tr)
	}
	id := str(claudeOf(t, rec, "json").SessionID)
	if fi, err := os.Stat(sessions); err != nil || fi.Mode().Perm() != 0o700 || ownerOf(fi) != 0 {
		t.Fatalf("%s: %v %v", sessions, fi, err)
	}
	if fi, err := os.Stat(filepath.Join(sessions, "projects")); err != nil || ownerOf(fi) != runUID {
		t.Fatalf("%s/projects is not the run user's: %v", sessions, err)
	}
	// Settings put into DIR itself are not read either.
	os.WriteFile(filepath.Join(sessions, "settings.json"), []byte(jsonOf(t, hookSettings(marker))), 0o644)

	steps := []struct {
		args []string
	}{
		{[]string{"--resume", id, "second"}},
		{[]string{"--continue", "third"}},
	}
	for i, s := range steps {
		srv := fakeapi.New(t, fakeapi.Tool("Bash", map[string]any{"command": "echo hi", "description": "hi"}), fakeapi.Text("resumed"))
		r, rec := cj.run(t, srv, append([]string{"--allowedTools=Bash", "--print", "--output-format", "json"}, s.args...)...)
		wantCode(t, r, 0)
		c := claudeOf(t, rec, "json")
		if str(c.SessionID) != id {
			t.Errorf("run %d: session %s, want the first run's %s", i+2, str(c.SessionID), id)
		}
		msgs := srv.Messages()
		if len(msgs) == 0 {
			t.Fatalf("run %d: no model call", i+2)
		}
		first, _ := json.Marshal(msgs[0].Messages)
		if !strings.Contains(string(first), "remember-token-XYZ") {
			t.Errorf("run %d did not resume the first run's session: its first request holds %.400s", i+2, first)
		}
		var all strings.Builder
		for _, q := range srv.Requests() {
			all.Write(q.Body)
		}
		if strings.Contains(all.String(), "PLANTED-MD") {
			t.Errorf("run %d: the CLAUDE.md the first run wrote reached the model", i+2)
		}
		if tr := srv.ToolResults(); len(tr) != 1 || tr[0].IsError {
			t.Errorf("run %d: tool results %+v", i+2, tr)
		}
		if fileExists(marker) {
			t.Fatalf("run %d: a hook planted by an earlier run ran", i+2)
		}
		if len(c.Transcripts) != 1 || !strings.HasPrefix(filepath.Base(c.Transcripts[0]), id+".") {
			t.Errorf("run %d: transcripts %q, want its own session's alone", i+2, c.Transcripts)
		}
	}

	// A run not given DIR cannot read it.
	probe := visibleDir(t)
	rec2 := recordPath(t)
	out := invocation{dir: probe}.run(t, "run", "--user", "1000", "--write", probe, "--record", rec2, "--", "sh", "-c", "ls "+sessions+"/projects 2>&1; true")
	if !strings.Contains(out.stdout, "Permission denied") {
		t.Errorf("a run without --claude-dir lists %s:\n%s", sessions, out.stdout)
	}
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestClaudeDirChecks: a --claude-dir that others could read or plant in,
// or that lies in a writable root of the run, is refused before anything
// runs (exit 125, naming the fix); started by an unprivileged user,
// agentjail gives the jail DIR/projects as that user's own.
func TestClaudeDirChecks(t *testing.T) {
	jailed(t)
	for _, c := range []struct {
		name string
		make func(parent, ws string) string // returns DIR
		want string
	}{
		{"readable by others", func(parent, _ string) string {
			d := filepath.Join(parent, "sessions")
			os.Mkdir(d, 0o755)
			return d
		}, "is owned by uid 0, mode 0755: it must be agentjail's user's (uid 0) and no one else's to read"},
		{"in a writable root", func(_, ws string) string { return filepath.Join(ws, "sessions") }, "lies in the writable root "},
		{"projects of another user", func(parent, _ string) string {
			d := filepath.Join(parent, "sessions")
			os.MkdirAll(filepath.Join(d, "projects"), 0o700)
			os.Chmod(d, 0o700)
			os.Chown(filepath.Join(d, "projects"), 4242, 4242)
			return d
		}, "projects is owned by uid 4242, not by the run user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			parent, err := os.MkdirTemp("/var/lib", "agentjail-it-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(parent) })
			ws := workspace(t)
			dir := c.make(parent, ws)
			r := aj(t, "run", "--user", "1000", "--write", ws, "--claude-dir", dir, "--", "true")
			if r.code != 125 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, want 125 and one line with %q:\n%s", r.code, c.want, r.stderr)
			}
		})
	}
	t.Run("unprivileged", func(t *testing.T) {
		t.Parallel()
		parent := visibleDir(t) // the run user's
		dir := filepath.Join(parent, "sessions")
		inv := invocation{env: []string{"HOME=/"}, cred: &syscall.Credential{Uid: runUID, Gid: runUID}, dir: parent}
		r := inv.run(t, "run", "--claude-dir", dir, "--", "sh", "-c", `echo kept > "$CLAUDE_CONFIG_DIR/projects/f"`)
		wantCode(t, r, 0)
		if b, err := os.ReadFile(filepath.Join(dir, "projects", "f")); err != nil || string(b) != "kept\n" {
			t.Errorf("%s/projects/f: %q %v", dir, b, err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 || ownerOf(fi) != runUID {
			t.Errorf("%s: %v %v", dir, fi, err)
		}
	})
}

// TestClaudeSettingsNotCarried: an operator's settings.json agentjail
// cannot filter (one with a comment, which it does not parse) is left out
// with a warning, and the run goes on with an empty one in its place,
// still read-only: the run is not refused by bubblewrap for the missing
// file, and the agent cannot plant settings there for the rest of the run.
func TestClaudeSettingsNotCarried(t *testing.T) {
	jailed(t)
	home := visibleDir(t)
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	settings := filepath.Join(home, ".claude", "settings.json")
	if err := os.WriteFile(settings, []byte("{\"model\": \"opus\", // a comment\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := invocation{env: []string{"HOME=" + home}}.run(t, "run", "--profile", "tier1", "--user", "1000", "--",
		"sh", "-c", `cat "$CLAUDE_CONFIG_DIR/settings.json"; echo; echo '{"hooks":{}}' > "$CLAUDE_CONFIG_DIR/settings.json" || echo read-only`)
	if r.code != 0 || !strings.Contains(r.stderr, settings+" is not a settings file agentjail reads") || !strings.Contains(r.stdout, "{}") || !strings.Contains(r.stdout, "read-only") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestClaudeConfigurationTooLarge: a ~/.claude/skills larger than what a
// run copies refuses the run (exit 125) with a message naming the way out.
func TestClaudeConfigurationTooLarge(t *testing.T) {
	jailed(t)
	home := visibleDir(t)
	big := filepath.Join(home, ".claude", "skills", "big")
	os.MkdirAll(big, 0o755)
	for i := range 20001 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := invocation{env: []string{"HOME=" + home}}.run(t, "run", "--profile", "tier1", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "claude: {settings: false}") {
		t.Errorf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

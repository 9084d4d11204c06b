package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
)

// These tests drive the real Claude Code CLI (testutil.ClaudeVersion,
// installed by `make test`) jailed by agentjail, against a local stand-in
// for the Messages API that plays a script per test.

// claudeJail is one jailed run of claude as uid 1000.
type claudeJail struct {
	profile string
	dir     string   // start directory and writable root (a visibleDir)
	flags   []string // more agentjail flags
	env     []string // more environment for agentjail
	noKey   bool     // no ANTHROPIC_API_KEY: claude must log in with copied credentials
	home    string   // the operator's $HOME ("" for an empty one)
}

// run jails `claude ARGS` and returns the result and the record.
func (c claudeJail) run(t *testing.T, srv *fakeapi.Server, args ...string) (result, runRecord) {
	t.Helper()
	bin := testutil.RequireClaude(t)
	if c.home == "" {
		c.home = visibleDir(t)
	}
	rec := recordPath(t)
	aj := []string{"run", "--profile", c.profile, "--user", "1000", "--write", c.dir, "--chdir", c.dir,
		"--record", rec, "--env", "DISABLE_AUTOUPDATER=1"}
	aj = append(append(aj, c.flags...), "--", bin)
	env := []string{"HOME=" + c.home}
	for _, e := range srv.Env() {
		if !c.noKey || !strings.HasPrefix(e, "ANTHROPIC_API_KEY=") {
			env = append(env, e)
		}
	}
	r := invocation{env: append(env, c.env...), dir: c.dir}.run(t, append(aj, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentjail exited %d\nstdout:\n%s\nstderr:\n%s\nthe stand-in saw:\n%s", r.code, r.stdout, r.stderr, srv.Dump())
		}
	})
	got := readRecord(t, rec, r.code)
	if l := got.Limits; l.PidsPeak != nil && l.MemoryPeak != nil {
		// What sizes the default caps (profiles/_base.yaml).
		t.Logf("the jail peaked at %d tasks and %d MiB", *l.PidsPeak, *l.MemoryPeak>>20)
	}
	return r, got
}

// claudeRecord checks what every record of a claude run carries and
// returns its claude object.
func claudeOf(t *testing.T, rec runRecord, format string) claudeRecord {
	t.Helper()
	if rec.Claude == nil {
		t.Fatalf("the record has no claude object")
	}
	c := *rec.Claude
	if c.OutputFormat != format {
		t.Errorf("claude.output_format %q, want %q", c.OutputFormat, format)
	}
	if _, err := os.Stat(filepath.Join("/run/agentjail", rec.RunID)); err == nil {
		t.Errorf("the run's staging directory /run/agentjail/%s is left after the run", rec.RunID)
	}
	return c
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// TestClaudeTextReply: a text reply passes through unchanged, claude's exit
// code passes through, the record carries its result and session id, and
// the transcript is copied out with --results.
func TestClaudeTextReply(t *testing.T) {
	jailed(t)
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		srv := fakeapi.New(t, fakeapi.Text("hello from the stand-in"))
		dir, results := visibleDir(t), filepath.Join(visibleDir(t), "results")
		r, rec := claudeJail{profile: "tier1", dir: dir, flags: []string{"--results", results}}.run(t, srv, "--print", "--output-format", "json", "say hi")
		wantCode(t, r, 0)
		var out struct {
			Result    string `json:"result"`
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Result != "hello from the stand-in" || !strings.HasSuffix(r.stdout, "}\n") {
			t.Fatalf("stdout is not claude's result line: %v\n%s", err, r.stdout)
		}
		if rec.Excerpt.Stdout.Head != r.stdout || rec.Bytes.Stdout != int64(len(r.stdout)) {
			t.Errorf("the record's stdout excerpt differs from what passed through")
		}
		c := claudeOf(t, rec, "json")
		var usage struct {
			Output int `json:"output_tokens"`
		}
		json.Unmarshal(c.Usage, &usage)
		if str(c.SessionID) != out.SessionID || str(c.Subtype) != "success" || c.IsError == nil || *c.IsError ||
			c.NumTurns == nil || *c.NumTurns != 1 || c.TotalCostUSD == nil || str(c.Result) != "hello from the stand-in" ||
			usage.Output != 3 || c.ParseError != nil {
			t.Errorf("record.claude = %+v (usage %s)", c, c.Usage)
		}
		transcript := filepath.Join(results, out.SessionID+".jsonl")
		if len(c.Transcripts) != 1 || c.Transcripts[0] != transcript {
			t.Errorf("claude.transcripts = %v, want [%s]", c.Transcripts, transcript)
		}
		if b, err := os.ReadFile(transcript); err != nil || !strings.Contains(string(b), "hello from the stand-in") {
			t.Errorf("transcript %s: %v\n%.500s", transcript, err, b)
		}
	})
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		srv := fakeapi.New(t, fakeapi.Text("plain words"))
		r, rec := claudeJail{profile: "tier2", dir: visibleDir(t)}.run(t, srv, "--print", "say hi")
		wantCode(t, r, 0)
		if r.stdout != "plain words\n" {
			t.Errorf("stdout %q", r.stdout)
		}
		if c := claudeOf(t, rec, "text"); c.Result != nil || c.ParseError != nil || c.SessionID != nil {
			t.Errorf("plain text was parsed: %+v", c)
		}
	})
}

// TestClaudeBashWritesFile: a Bash tool call writes into a writable root.
func TestClaudeBashWritesFile(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	srv := fakeapi.New(t,
		fakeapi.Tool("Bash", map[string]any{"command": "printf made-by-claude > out.txt && id -u", "description": "write a file"}),
		fakeapi.Text("wrote it"))
	r, rec := claudeJail{profile: "tier2", dir: dir}.run(t, srv, "--allowedTools=Bash", "--print", "--output-format", "json", "write a file")
	wantCode(t, r, 0)
	p := filepath.Join(dir, "out.txt")
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "made-by-claude" {
		t.Fatalf("%s: %q %v", p, b, err)
	}
	if fi, _ := os.Stat(p); fi.Sys().(*syscall.Stat_t).Uid != runUID {
		t.Errorf("out.txt is owned by %d, not the run user", fi.Sys().(*syscall.Stat_t).Uid)
	}
	tr := srv.ToolResults()
	if len(tr) != 1 || tr[0].IsError || strings.TrimSpace(tr[0].Content) != "1000" {
		t.Errorf("tool results %+v", tr)
	}
	if c := claudeOf(t, rec, "json"); c.NumTurns == nil || *c.NumTurns != 2 || str(c.Result) != "wrote it" {
		t.Errorf("record.claude %+v", c)
	}
}

// TestClaudeProtectedPaths: Write, Edit and Bash tool calls against .env,
// .git/hooks and .claude-ops fail — refused by the jail, with claude's own
// permission checks off — and nothing changes on the host.
func TestClaudeProtectedPaths(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{".env": "SECRET=1\n", ".git/hooks/": "", ".git/HEAD": "ref: refs/heads/main\n",
		".git/config": "[core]\n", ".claude-ops/mcp.json": `{"mcpServers":{}}` + "\n", "README": "ok\n"})
	before := map[string]string{}
	for _, p := range []string{".env", ".git", ".claude-ops"} {
		before[p] = treeHash(t, filepath.Join(dir, p))
	}
	srv := fakeapi.New(t,
		fakeapi.Tool("Read", map[string]any{"file_path": dir + "/.env"}), // Write and Edit need a Read first
		fakeapi.Tool("Write", map[string]any{"file_path": dir + "/.env", "content": "PWNED=1\n"}),
		fakeapi.Tool("Edit", map[string]any{"file_path": dir + "/.env", "old_string": "SECRET=1", "new_string": "PWNED=1"}),
		fakeapi.Tool("Bash", map[string]any{"command": "echo PWNED=1 >> .env"}),
		fakeapi.Tool("Bash", map[string]any{"command": "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit"}),
		fakeapi.Tool("Write", map[string]any{"file_path": dir + "/.git/hooks/post-checkout", "content": "#!/bin/sh\n"}),
		fakeapi.Tool("Bash", map[string]any{"command": `echo '{"mcpServers":{"evil":{"command":"sh"}}}' > .claude-ops/mcp.json`}),
		fakeapi.Text("done"))
	r, rec := claudeJail{profile: "tier1", dir: dir}.run(t, srv, "--dangerously-skip-permissions", "--print", "--output-format", "json", "tamper")
	wantCode(t, r, 0)
	for p, h := range before {
		if treeHash(t, filepath.Join(dir, p)) != h {
			t.Errorf("%s changed on the host", p)
		}
	}
	tr := srv.ToolResults()
	if len(tr) != 7 {
		t.Fatalf("%d tool results, want 7: %+v", len(tr), tr)
	}
	// Claude writes through a temporary file renamed over the target: the
	// rename onto the read-only mount fails (EBUSY), as does creating
	// anything under a read-only directory (EROFS).
	for i, want := range []string{"", "EBUSY", "EBUSY", "Read-only file system", "Read-only file system", "EROFS", "Read-only file system"} {
		if want == "" {
			continue
		}
		if !tr[i].IsError || !strings.Contains(tr[i].Content, want) {
			t.Errorf("tool call %d: is_error %v, %q; want a refusal with %q", i, tr[i].IsError, tr[i].Content, want)
		}
	}
	if c := claudeOf(t, rec, "json"); str(c.Result) != "done" {
		t.Errorf("record.claude %+v", c)
	}
}

// TestClaudeOwnSandbox: Claude Code's own sandbox (bubblewrap, its own
// namespaces) works inside the jail, in a directory without a repository
// (where agentjail masks .claude and .git) and in a git repository that
// has Claude settings: the sandboxed command sees a network namespace of
// its own and still writes to its working directory.
func TestClaudeOwnSandbox(t *testing.T) {
	jailed(t)
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	settings := `{"sandbox":{"enabled":true,"failIfUnavailable":true,"allowUnsandboxedCommands":false}}`
	for _, c := range []struct {
		profile string
		files   map[string]string
	}{
		{"tier1", nil},
		{"tier2", map[string]string{".git/hooks/": "", ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n", ".claude/settings.json": "{}\n"}},
	} {
		t.Run(c.profile, func(t *testing.T) {
			t.Parallel()
			dir := visibleDir(t)
			write(t, dir, c.files)
			srv := fakeapi.New(t,
				fakeapi.Tool("Bash", map[string]any{"command": "readlink /proc/self/ns/net; echo sandboxed > inner.txt", "description": "probe"}),
				fakeapi.Text("done"))
			r, _ := claudeJail{profile: c.profile, dir: dir}.run(t, srv, "--settings", settings, "--print", "--output-format", "json", "probe")
			wantCode(t, r, 0)
			tr := srv.ToolResults()
			if len(tr) != 1 || tr[0].IsError || !strings.HasPrefix(tr[0].Content, "net:[") {
				t.Fatalf("the sandboxed command failed: %+v", tr)
			}
			if inner := strings.TrimSpace(tr[0].Content); inner == hostNet {
				t.Errorf("the sandboxed command shares the jail's network namespace %s: Claude Code's sandbox is not in effect", inner)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "inner.txt")); err != nil || string(b) != "sandboxed\n" {
				t.Errorf("the sandboxed command could not write its working directory: %q %v", b, err)
			}
		})
	}
}

// TestClaudeIdleTimeout: a model call that stalls mid-stream leaves claude
// silent; --idle-timeout ends the run with 124, and the record still has
// the session id from stream-json's init event.
func TestClaudeIdleTimeout(t *testing.T) {
	jailed(t)
	srv := fakeapi.New(t, fakeapi.Stall(5*time.Minute))
	// The idle clock runs from the start: claude's own start-up, before
	// its first (init) line, counts as silence. On a loaded 2-core host
	// that took over 2 s; the test wants the session id printed first.
	r, rec := claudeJail{profile: "tier1", dir: visibleDir(t), flags: []string{"--idle-timeout", "8s", "--grace", "2s"}}.run(t, srv,
		"--print", "--output-format", "stream-json", "--verbose", "hang")
	wantCode(t, r, 124)
	if rec.Reason != "idle_timeout" || len(rec.SignalsSent) == 0 || rec.SignalsSent[0].Signal != "SIGTERM" || len(rec.Orphans) != 0 {
		t.Errorf("reason %s, signals %v, orphans %v", rec.Reason, rec.sent(), rec.Orphans)
	}
	c := claudeOf(t, rec, "stream-json")
	if c.SessionID == nil || !strings.Contains(r.stdout, *c.SessionID) || c.Result != nil || !strings.Contains(str(c.ParseError), "no result line") {
		t.Errorf("record.claude %+v", c)
	}
}

// TestClaudeAPIErrors: an API error gives claude's own non-zero exit code,
// passed through, and a record with is_error and the HTTP status.
func TestClaudeAPIErrors(t *testing.T) {
	jailed(t)
	for _, status := range []int{http.StatusInternalServerError, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv := fakeapi.New(t, fakeapi.Fail(status))
			r, rec := claudeJail{profile: "tier1", dir: visibleDir(t), env: []string{"CLAUDE_CODE_MAX_RETRIES=0"}}.run(t, srv, "--print", "--output-format", "json", "hi")
			if r.code == 0 || rec.Reason != "exit" || rec.AgentExitCode == nil || *rec.AgentExitCode != r.code {
				t.Errorf("exit %d, reason %s, agent_exit_code %v: claude's own failure must pass through", r.code, rec.Reason, rec.AgentExitCode)
			}
			c := claudeOf(t, rec, "json")
			if c.IsError == nil || !*c.IsError || c.APIErrorStatus == nil || *c.APIErrorStatus != status || c.SessionID == nil {
				t.Errorf("record.claude %+v", c)
			}
		})
	}
}

// operatorLogin makes an operator home holding a Claude Code OAuth login
// (root's, 0600, as `claude login` leaves it) and ~/.claude.json.
func operatorLogin(t *testing.T, access string, expires time.Time) (home, creds string) {
	t.Helper()
	home = visibleDir(t)
	os.Chown(home, 0, 0)
	creds = filepath.Join(home, ".claude", ".credentials.json")
	os.MkdirAll(filepath.Dir(creds), 0o700)
	login := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":"sk-ant-ort01-old","expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`,
		access, expires.UnixMilli())
	if err := os.WriteFile(creds, []byte(login), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding":true,"numStartups":7}`), 0o600)
	return home, creds
}

// TestClaudeCopiedLogin: without an API key, the jailed claude (uid 1000)
// logs in with the operator's credentials, which are root's and 0600 on
// the host: agentjail copied them into the run's own Claude directory. A
// login claude did not refresh is left alone.
func TestClaudeCopiedLogin(t *testing.T) {
	jailed(t)
	home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
	before, _ := os.ReadFile(creds)
	srv := fakeapi.New(t, fakeapi.Text("logged in"))
	r, rec := claudeJail{profile: "tier1", dir: visibleDir(t), noKey: true, home: home}.run(t, srv, "--print", "--output-format", "json", "hi")
	wantCode(t, r, 0)
	var auth []string
	for _, q := range srv.Requests() {
		if q.Method == http.MethodPost {
			auth = append(auth, q.Header.Get("Authorization"))
		}
	}
	if len(auth) == 0 || auth[0] != "Bearer sk-ant-oat01-operator" {
		t.Errorf("claude did not use the copied login: Authorization %q", auth)
	}
	c := claudeOf(t, rec, "json")
	if cr := c.Credentials; cr == nil || cr.Source != creds || cr.Refreshed || cr.WrittenBack || !cr.WriteBack || !strings.Contains(cr.Detail, "unchanged") {
		t.Errorf("record.claude.credentials %+v", cr)
	}
	if after, _ := os.ReadFile(creds); string(after) != string(before) {
		t.Errorf("the operator's credentials changed:\n%s", after)
	}
	if fi, _ := os.Stat(creds); fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the operator's credentials are now %v, uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
}

// TestClaudeRefreshedLoginWrittenBack: an expired login makes the jailed
// claude refresh it (at platform.claude.com, which the stand-in plays
// through an HTTPS proxy); agentjail writes the new credentials back to the
// operator's file, atomically, keeping its owner and mode — unless the
// profile says claude.write_back: false.
func TestClaudeRefreshedLoginWrittenBack(t *testing.T) {
	jailed(t)
	for _, writeBack := range []bool{true, false} {
		t.Run(fmt.Sprint("write_back=", writeBack), func(t *testing.T) {
			t.Parallel()
			home, creds := operatorLogin(t, "sk-ant-oat01-expired", time.Now().Add(-time.Hour))
			before, _ := os.ReadFile(creds)
			dir := visibleDir(t)
			srv := fakeapi.New(t, fakeapi.Text("refreshed"))
			srv.RefreshTo("sk-ant-oat01-fresh", "sk-ant-ort01-fresh", 8*time.Hour)
			cj := claudeJail{profile: "tier1", dir: dir, noKey: true, home: home, env: srv.ProxyEnv(t, dir)}
			if !writeBack {
				write(t, dir, map[string]string{"keep.yaml": "extends: tier1\nclaude: {write_back: false}\n"})
				cj.profile = filepath.Join(dir, "keep.yaml")
			}
			r, rec := cj.run(t, srv, "--print", "--output-format", "json", "hi")
			wantCode(t, r, 0)
			if last := srv.Messages(); len(last) == 0 {
				t.Fatalf("claude never called the API")
			}
			after, _ := os.ReadFile(creds)
			cr := claudeOf(t, rec, "json").Credentials
			if cr == nil || !cr.Refreshed || cr.WrittenBack != writeBack {
				t.Fatalf("record.claude.credentials %+v", cr)
			}
			if !writeBack {
				if string(after) != string(before) || !strings.Contains(cr.Detail, "write_back: false") {
					t.Errorf("written back although switched off (%s):\n%s", cr.Detail, after)
				}
				return
			}
			if !strings.Contains(string(after), `"accessToken":"sk-ant-oat01-fresh"`) || !strings.Contains(string(after), `"refreshToken":"sk-ant-ort01-fresh"`) {
				t.Errorf("the refreshed login was not written back:\n%s", after)
			}
			if fi, _ := os.Stat(creds); fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("written back as %v, uid %d; want the source's 0600 root", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
			}
			if left, _ := filepath.Glob(filepath.Join(home, ".claude", ".*agentjail*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// TestClaudeCredentialsNotReadThroughLinks: a run that replaces its
// credentials file by a link to a host secret gets nothing written back:
// agentjail reads back only a plain file of the run user's own.
func TestClaudeCredentialsNotReadThroughLinks(t *testing.T) {
	jailed(t)
	home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
	before, _ := os.ReadFile(creds)
	rec := recordPath(t)
	dir := visibleDir(t)
	r := invocation{env: []string{"HOME=" + home}, dir: dir}.run(t, "run", "--user", "1000", "--write", dir, "--record", rec, "--",
		"sh", "-c", `cd "$CLAUDE_CONFIG_DIR" && stat -c '%u %a' .credentials.json && ln -sf /etc/shadow .credentials.json`)
	wantCode(t, r, 0)
	if r.stdout != "1000 600\n" {
		t.Errorf("the copied credentials are %q in the jail, want the run user's, 0600", r.stdout)
	}
	got := readRecord(t, rec, 0)
	if got.Claude == nil || got.Claude.Credentials == nil || got.Claude.Credentials.WrittenBack || !strings.Contains(got.Claude.Credentials.Detail, "cannot be read back") {
		t.Errorf("record.claude %+v", got.Claude)
	}
	if after, _ := os.ReadFile(creds); string(after) != string(before) {
		t.Errorf("the operator's credentials changed:\n%s", after)
	}
}

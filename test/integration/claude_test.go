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
	before  string   // shell commands the jail runs before it execs claude
	// bare gives agentjail only the stand-in's base URL and key, what an
	// operator has, without the stand-in's variables that keep claude's
	// background traffic off (fakeapi.Server.Env): in a proxy jail
	// agentjail's own defaults must keep claude to its API.
	bare bool
}

// run jails `claude ARGS` and returns the result and the record.
func (c claudeJail) run(t *testing.T, srv *fakeapi.Server, args ...string) (result, runRecord) {
	t.Helper()
	bin := testutil.RequireClaude(t)
	if c.home == "" {
		c.home = visibleDir(t)
	}
	rec := recordPath(t)
	aj := []string{"run", "--profile", c.profile, "--user", "1000", "--write", c.dir, "--chdir", c.dir, "--record", rec}
	if !c.bare {
		aj = append(aj, "--env", "DISABLE_AUTOUPDATER=1")
	}
	aj = append(append(aj, c.flags...), "--", bin)
	if c.before != "" {
		aj = append(aj[:len(aj)-1], "sh", "-c", c.before+` && exec "$0" "$@"`, bin)
	}
	env := []string{"HOME=" + c.home}
	for _, e := range srv.Env() {
		if (!c.noKey || !strings.HasPrefix(e, "ANTHROPIC_API_KEY=")) && (!c.bare || strings.HasPrefix(e, "ANTHROPIC_")) {
			env = append(env, e)
		}
	}
	r := invocation{env: append(env, c.env...), dir: c.dir}.run(t, append(aj, args...)...)
	var got runRecord
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agentjail exited %d\nstdout:\n%s\nstderr:\n%s\nthe stand-in saw:\n%s\nthe broker's connections: %s", r.code, r.stdout, r.stderr, srv.Dump(), jsonOf(t, got.Network))
		}
	})
	got = readRecord(t, rec, r.code)
	if got.Network != nil && got.Network.Mode == "proxy" {
		got.Network.noneRefused(t)
	}
	if l := got.Limits; l.PidsPeak != nil && l.MemoryPeak != nil {
		// What sizes the default caps (profiles/_base.yaml).
		t.Logf("the jail peaked at %d tasks and %d MiB", *l.PidsPeak, *l.MemoryPeak>>20)
	}
	return r, got
}

// saveJailNet, run in the jail before the agent (claudeJail.before,
// codexJail.before), leaves the jail's network namespace in .jailnet of
// the start directory: a proxy jail's is its own, not the host's, so a
// test of the agent's own sandbox compares with this one (jailNet).
const saveJailNet = "readlink /proc/self/ns/net > .jailnet"

// jailNet is the network namespace saveJailNet left in dir.
func jailNet(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".jailnet"))
	if err != nil || !strings.HasPrefix(string(b), "net:[") {
		t.Fatalf("the jail's network namespace: %q %v", b, err)
	}
	return strings.TrimSpace(string(b))
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
		t.Errorf("the run's agent-homes directory /run/agentjail/%s is left after the run", rec.RunID)
	}
	// The agent object (record_version 2) says what the claude object says.
	a := rec.Agent
	if a == nil || a.Kind != "claude" || a.OutputFormat != c.OutputFormat || str(a.SessionID) != str(c.SessionID) || str(a.Result) != str(c.Result) ||
		a.ResultBytes != c.ResultBytes || string(a.Usage) != string(c.Usage) || str(a.ParseError) != str(c.ParseError) || !slices.Equal(a.Transcripts, c.Transcripts) ||
		(a.IsError == nil) != (c.IsError == nil) || (a.Credentials == nil) != (c.Credentials == nil) || a.Commands != nil {
		t.Errorf("record.agent %+v differs from record.claude %+v", a, c)
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
		t.Fatalf("%d tool results, want 7 (conversation lengths asked: %s): %+v", len(tr), srv.Turns(), tr)
	}
	// Claude writes through a temporary file renamed over the target: the
	// rename onto the read-only mount fails (EBUSY), as does creating
	// anything under a read-only directory (EROFS).
	for i, want := range []string{"", "EBUSY", "EBUSY", "Read-only file system", "Read-only file system", "EROFS", "Read-only file system"} {
		if want == "" {
			continue
		}
		if !tr[i].IsError || !strings.Contains(strings.ToLower(tr[i].Content), strings.ToLower(want)) { // bash or zsh, whichever claude found
			t.Errorf("tool call %d: is_error %v, %q; want a refusal with %q", i, tr[i].IsError, tr[i].Content, want)
		}
	}
	if c := claudeOf(t, rec, "json"); str(c.Result) != "done" {
		t.Errorf("record.claude %+v", c)
	}
}

// TestClaudeOwnSandbox: Claude Code's own sandbox (bubblewrap, its own
// namespaces) works inside the jail, in a directory without a repository
// (where agentjail masks .git, and makes .claude a tmpfs in which the
// protected settings are masks, and Claude Code's sandbox makes its own
// mount points) and in a git repository that
// has Claude settings: the sandboxed command sees a network namespace of
// its own and still writes to its working directory.
func TestClaudeOwnSandbox(t *testing.T) {
	jailed(t)
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
			r, _ := claudeJail{profile: c.profile, dir: dir, before: saveJailNet}.run(t, srv, "--settings", settings, "--print", "--output-format", "json", "probe")
			wantCode(t, r, 0)
			tr := srv.ToolResults()
			if len(tr) != 1 || tr[0].IsError || !strings.HasPrefix(tr[0].Content, "net:[") {
				t.Fatalf("the sandboxed command failed: %+v", tr)
			}
			if inner := strings.TrimSpace(tr[0].Content); inner == jailNet(t, dir) {
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
	// that took over 8 s; the test wants the session id printed first.
	r, rec := claudeJail{profile: "tier1", dir: visibleDir(t), flags: []string{"--idle-timeout", "20s", "--grace", "2s"}}.run(t, srv,
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
// logs in with the operator's login, whose file is root's and 0600 on the
// host: agentjail copied into the run's own Claude directory the access
// token alone. Measured with Claude Code 2.1.197: a valid access token
// without a refresh token is enough: claude uses it, and asks for no
// refresh (the stand-in, as its HTTPS proxy, plays every host but the API
// and would see one).
func TestClaudeCopiedLogin(t *testing.T) {
	jailed(t)
	home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
	before, _ := os.ReadFile(creds)
	dir := visibleDir(t)
	srv := fakeapi.New(t,
		fakeapi.Tool("Bash", map[string]any{"command": `cat "$CLAUDE_CONFIG_DIR/.credentials.json"`, "description": "show the login"}),
		fakeapi.Text("logged in"))
	srv.RefreshTo("sk-ant-oat01-fresh", "sk-ant-ort01-fresh", 8*time.Hour)
	// --net host: in a proxy jail the login stays with the broker
	// (TestNetworkClaudeKeyStaysOut).
	r, rec := claudeJail{profile: "tier1", dir: dir, noKey: true, home: home, env: srv.ProxyEnv(t, dir), flags: []string{"--net", "host"}}.run(t, srv,
		"--allowedTools=Bash", "--print", "--output-format", "json", "hi")
	wantCode(t, r, 0)
	calls := 0
	for _, q := range srv.Requests() {
		switch {
		case q.Path == "/v1/oauth/token":
			t.Errorf("claude asked for a refresh: %s %s", q.Method, q.Body)
		case q.Method == http.MethodPost && strings.HasPrefix(q.Path, "/v1/messages"):
			calls++
			if auth := q.Header.Get("Authorization"); auth != "Bearer sk-ant-oat01-operator" {
				t.Errorf("claude did not use the copied login: Authorization %q", auth)
			}
		}
	}
	if calls < 2 {
		t.Errorf("%d model calls, want 2", calls)
	}
	if tr := srv.ToolResults(); len(tr) != 1 || !strings.Contains(tr[0].Content, `"accessToken":"sk-ant-oat01-operator"`) || strings.Contains(tr[0].Content, "refreshToken") {
		t.Errorf("the jail's credentials file is not the access token alone: %+v", tr)
	}
	c := claudeOf(t, rec, "json")
	if cr := c.Credentials; cr == nil || cr.Source != creds || !cr.Copied || cr.ExpiresAt == nil || cr.Refreshed || cr.WriteBack || cr.WrittenBack ||
		!strings.Contains(cr.Detail, "without the refresh token") {
		t.Errorf("record.claude.credentials %+v", cr)
	}
	if after, _ := os.ReadFile(creds); string(after) != string(before) {
		t.Errorf("the operator's credentials changed:\n%s", after)
	}
	if fi, _ := os.Stat(creds); fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the operator's credentials are now %v, uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
}

// TestClaudeExpiredAccessToken measures what Claude Code 2.1.197 does with
// an access token that has expired and no refresh token (the agent writes
// one into its own directory: agentjail itself refuses to start claude on
// such a login, TestClaudeLoginChecks): it asks for no refresh, sends the
// expired token, and the API's 401 (the stand-in answers it as the API
// does) ends the session with its exit 1, "Failed to authenticate".
func TestClaudeExpiredAccessToken(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"expired.json": fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-expired","expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`,
		time.Now().Add(-time.Hour).UnixMilli())})
	srv := fakeapi.New(t, fakeapi.Fail(http.StatusUnauthorized))
	srv.RefreshTo("sk-ant-oat01-fresh", "sk-ant-ort01-fresh", 8*time.Hour)
	// --net host: a proxy jail's broker would drop the agent's own token
	// (the API route carries the operator's credential or none).
	cj := claudeJail{profile: "tier1", dir: dir, noKey: true, env: append(srv.ProxyEnv(t, dir), "CLAUDE_CODE_MAX_RETRIES=0"), flags: []string{"--net", "host"},
		before: `cp expired.json "$CLAUDE_CONFIG_DIR/.credentials.json"`}
	r, rec := cj.run(t, srv, "--print", "--output-format", "json", "hi")
	if r.code != 1 || rec.AgentExitCode == nil || *rec.AgentExitCode != 1 {
		t.Errorf("exit %d, agent_exit_code %v; want claude's own 1", r.code, rec.AgentExitCode)
	}
	var sent []string
	for _, q := range srv.Requests() {
		if q.Path == "/v1/oauth/token" {
			t.Errorf("claude asked for a refresh without a refresh token: %s", q.Body)
		}
		if q.Method == http.MethodPost && strings.HasPrefix(q.Path, "/v1/messages") {
			sent = append(sent, q.Header.Get("Authorization"))
		}
	}
	if len(sent) == 0 || sent[0] != "Bearer sk-ant-oat01-expired" {
		t.Errorf("model calls sent with %q, want the expired token", sent)
	}
	var out struct {
		IsError        bool   `json:"is_error"`
		APIErrorStatus int    `json:"api_error_status"`
		Result         string `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !out.IsError || out.APIErrorStatus != http.StatusUnauthorized || !strings.Contains(out.Result, "Failed to authenticate") {
		t.Errorf("claude's result: %v\n%s", err, r.stdout)
	}
}

// TestClaudeOAuthTokenEnv: the long-lived token of `claude setup-token`
// passes the environment allowlist (CLAUDE_CODE_*) and the jailed claude
// logs in with it; the operator's login, expired here, neither stops the
// run nor is copied in.
func TestClaudeOAuthTokenEnv(t *testing.T) {
	jailed(t)
	home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(-time.Hour))
	srv := fakeapi.New(t, fakeapi.Text("logged in"))
	r, rec := claudeJail{profile: "tier1", dir: visibleDir(t), noKey: true, home: home,
		env: []string{"CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-longlived"}}.run(t, srv, "--print", "--output-format", "json", "hi")
	wantCode(t, r, 0)
	msgs := 0
	for _, q := range srv.Requests() {
		if q.Method == http.MethodPost && strings.HasPrefix(q.Path, "/v1/messages") {
			msgs++
			if auth := q.Header.Get("Authorization"); auth != "Bearer sk-ant-oat01-longlived" {
				t.Errorf("Authorization %q, want the CLAUDE_CODE_OAUTH_TOKEN", auth)
			}
		}
	}
	if msgs == 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("%d model calls; stderr:\n%s", msgs, r.stderr)
	}
	cr := claudeOf(t, rec, "json").Credentials
	if cr == nil || cr.Source != creds || cr.Copied || !strings.Contains(cr.Detail, "expired") || !strings.HasSuffix(cr.Detail, "the run has CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("record.claude.credentials %+v", cr)
	}
}

// TestClaudeLoginChecks: a run that cannot be given a valid login says so
// before it starts, without the network. An expired login stops `claude`
// (exit 125, one line naming the file, the ways out and the record)
// unless the jail's environment gives it a login of its own; another
// command runs, warned, without it. A login that expires before the wall
// limit is copied in, with a warning. claude here is a script of that
// name: agentjail knows a claude run by its program's base name.
func TestClaudeLoginChecks(t *testing.T) {
	jailed(t)
	bin := visibleDir(t)
	write(t, bin, map[string]string{"claude": "#!/bin/sh\necho fake claude ran\n"})
	os.Chmod(filepath.Join(bin, "claude"), 0o755)
	fake := []string{filepath.Join(bin, "claude"), "--print", "hi"}
	probe := []string{"sh", "-c", `test -e "$CLAUDE_CONFIG_DIR/.credentials.json" && echo copied || echo absent`}
	// In a proxy jail (tier1's default) the login goes to the broker, and
	// the jail holds a placeholder of it (docs/network.md).
	placeholder := []string{"sh", "-c", `test -e "$CLAUDE_CONFIG_DIR/.credentials.json" && echo copied || echo absent; case "$CLAUDE_CODE_OAUTH_TOKEN" in sk-ant-oat01-agentjail-placeholder-*) echo placeholder;; esac`}
	for _, c := range []struct {
		name    string
		expires time.Duration // from now
		env     []string
		argv    []string
		code    int
		stdout  string
		stderr  string // what stderr says after the credentials file's path; "" for nothing
		copied  bool
		net     string // --net; "" for the profile's (proxy)
	}{
		{"expired", -time.Hour, nil, fake, 125, "",
			" holds a Claude Code login that expired at ", false, ""},
		{"expired with an API key", -time.Hour, []string{"ANTHROPIC_API_KEY=sk-ant-test"}, fake, 0, "fake claude ran\n", "", false, ""},
		{"expired, not claude", -time.Hour, nil, probe, 0, "absent\n", " holds a Claude Code login that expired at ", false, ""},
		{"expires before the wall limit", 2 * time.Minute, nil, probe, 0, "copied\n", ": its access token expires at ", true, "host"},
		{"valid", 8 * time.Hour, nil, probe, 0, "copied\n", "", true, "host"},
		{"valid, in a proxy jail", 8 * time.Hour, nil, placeholder, 0, "absent\nplaceholder\n", "", false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(c.expires))
			ws, rec := workspace(t), recordPath(t)
			args := []string{"run", "--user", "1000", "--write", ws, "--timeout", "10m", "--record", rec}
			if c.net != "" {
				args = append(args, "--net", c.net)
			}
			args = append(append(args, "--"), c.argv...)
			r := invocation{env: append([]string{"HOME=" + home}, c.env...), dir: ws}.run(t, args...)
			got := readRecord(t, rec, c.code)
			if r.code != c.code || r.stdout != c.stdout {
				t.Fatalf("exit %d, stdout %q; want %d, %q\nstderr:\n%s", r.code, r.stdout, c.code, c.stdout, r.stderr)
			}
			if _, err := os.Stat(filepath.Join("/run/agentjail", got.RunID)); err == nil {
				t.Errorf("the run's agent-homes directory is left")
			}
			// What this host degrades (a lower nofile limit), and the
			// warning --net host gets (TestNetworkHostFlagSaid), are not
			// at stake.
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n") {
				if l != "" && !strings.HasPrefix(l, "agentjail: degraded: ") && !strings.HasPrefix(l, "agentjail: warning: --net host: ") {
					lines = append(lines, l)
				}
			}
			switch {
			case c.stderr == "":
				if len(lines) > 0 {
					t.Errorf("stderr:\n%s", r.stderr)
				}
			case len(lines) != 1 || !strings.Contains(lines[0], creds+c.stderr):
				t.Errorf("stderr is not one line saying %q:\n%s", creds+c.stderr, r.stderr)
			case c.code == 125:
				want := " (the jail gets no refresh token); run claude on the host to renew it, or give the run CLAUDE_CODE_OAUTH_TOKEN (claude setup-token) or ANTHROPIC_API_KEY"
				if !strings.HasPrefix(got.Error, creds) || !strings.HasSuffix(got.Error, want) || got.Reason != "setup_failed" || lines[0] != "agentjail: "+got.Error+"; the record: "+rec {
					t.Errorf("stderr %q, record reason %s error %q", lines[0], got.Reason, got.Error)
				}
			default:
				if !strings.HasPrefix(lines[0], "agentjail: warning: ") || !slices.Contains(got.Warnings, strings.TrimPrefix(lines[0], "agentjail: warning: ")) {
					t.Errorf("stderr %q is no warning kept in the record (%q)", lines[0], got.Warnings)
				}
			}
			if c.code == 125 {
				return
			}
			if got.Claude == nil || got.Claude.Credentials == nil {
				t.Fatalf("the record has no claude.credentials")
			}
			brokered := c.stdout == "absent\nplaceholder\n"
			if cr := got.Claude.Credentials; cr.Source != creds || cr.Copied != c.copied || (cr.ExpiresAt != nil) != (c.copied || brokered) ||
				brokered != strings.Contains(cr.Detail, "broker holds its access token") {
				t.Errorf("record.claude.credentials %+v", cr)
			}
		})
	}
}

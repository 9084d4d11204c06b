package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/internal/testutil/fakeopenai"
)

// These tests drive the real Codex CLI (testutil.CodexVersion, installed
// by `make test`) jailed by agentjail, against a local stand-in for the
// Responses API that plays a script per test.

// codexJail is one jailed run of `codex exec --json` as uid 1000.
type codexJail struct {
	profile  string
	dir      string   // start directory and writable root (a visibleDir)
	env      []string // more environment for agentjail
	home     string   // the operator's $HOME ("" for an empty one)
	provider []string // codex's -c options for the stand-in (nil: viaBroker's, or srv.Args() with the host's network)
	flags    []string // more agentjail flags
	before   string   // shell commands the jail runs before it execs codex
}

// viaBroker are codex's options in a proxy jail (tier1 and tier2): the
// provider agentjail writes in CODEX_HOME/config.toml already points at
// the broker's API route, whose upstream is the stand-in (OPENAI_BASE_URL
// in agentjail's environment, which run adds); only the stand-in's model
// and its retries off.
var viaBroker = []string{"-c", "model_providers.agentjail.request_max_retries=0", "-c", "model_providers.agentjail.stream_max_retries=0", "-c", "model=stub-model"}

// run jails `codex exec --json -s workspace-write ARGS` (Codex's own
// sandbox on) and returns the result and the record.
func (c codexJail) run(t *testing.T, srv *fakeopenai.Server, args ...string) (result, runRecord) {
	t.Helper()
	bin := testutil.RequireCodex(t)
	if c.home == "" {
		c.home = visibleDir(t)
	}
	hostNet := c.profile == "tier3" || slices.Contains(c.flags, "host")
	if c.provider == nil {
		c.provider = viaBroker
		if hostNet {
			c.provider = srv.Args()
		}
	}
	rec := recordPath(t)
	aj := append([]string{"run", "--profile", c.profile, "--user", "1000", "--write", c.dir, "--chdir", c.dir, "--record", rec}, c.flags...)
	if c.before != "" {
		// A script named codex, so that agentjail still knows the run
		// for codex's (by its program's base name).
		wrap := visibleDir(t)
		write(t, wrap, map[string]string{"codex": "#!/bin/sh\n" + c.before + "\nexec " + bin + ` "$@"` + "\n"})
		os.Chmod(filepath.Join(wrap, "codex"), 0o755)
		bin = filepath.Join(wrap, "codex")
	}
	aj = append(aj, "--", bin, "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write")
	aj = append(append(aj, c.provider...), args...)
	env := append([]string{"HOME=" + c.home, "OPENAI_BASE_URL=" + srv.URL}, c.env...)
	r := invocation{env: env, dir: c.dir}.run(t, aj...)
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
	if _, err := os.Stat(filepath.Join("/run/agentjail", got.RunID)); err == nil {
		t.Errorf("the run's agent-homes directory /run/agentjail/%s is left after the run", got.RunID)
	}
	return r, got
}

// codexOf checks the record's agent object of a codex run and returns it.
func codexOf(t *testing.T, rec runRecord) agentRecord {
	t.Helper()
	if rec.Agent == nil || rec.Agent.Kind != "codex" || rec.Agent.OutputFormat != "json" {
		t.Fatalf("the record's agent object is not codex's: %+v", rec.Agent)
	}
	if rec.Claude != nil {
		t.Errorf("a codex run's record has a claude object: %+v", rec.Claude)
	}
	return *rec.Agent
}

// threadID is the thread.started event's id in codex's JSONL output.
func threadID(t *testing.T, stdout string) string {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "thread.started" {
			return ev.ThreadID
		}
	}
	t.Fatalf("no thread.started event:\n%s", stdout)
	return ""
}

// commandItems counts the command_execution items codex completed in its
// JSONL output.
func commandItems(stdout string) int {
	n := 0
	for _, line := range strings.Split(stdout, "\n") {
		var ev struct {
			Type string `json:"type"`
			Item struct {
				Type string `json:"type"`
			} `json:"item"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "item.completed" && ev.Item.Type == "command_execution" {
			n++
		}
	}
	return n
}

// TestCodexJailed: on each tier, codex exec runs its shell tool in the
// jail as the run user, under its own sandbox (bubblewrap, a network
// namespace of its own; bwrap 0.8 takes its compatibility path, which
// needs CODEX_HOME outside /tmp): the command writes the writable root,
// cannot write .env (agentjail) nor the private home (Codex's sandbox:
// agentjail lets the home be written), and sees the private CODEX_HOME,
// not the one in agentjail's environment. In a proxy jail (tier1, tier2)
// codex reaches nothing but its API route. The writable root's missing
// .git is masked with a file holding a gitdir pointer, which codex does
// not misread (TestCodexMisreadsAnEmptyGitFile is the control), and the
// record's agent object has the thread, the answer, the usage and the
// command.
func TestCodexJailed(t *testing.T) {
	jailed(t)
	for _, profile := range []string{"tier1", "tier2", "tier3"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			dir := visibleDir(t)
			write(t, dir, map[string]string{".env": "SECRET=1\n"})
			srv := fakeopenai.New(t,
				fakeopenai.Exec(`printf made-by-codex > out.txt; id -u; echo "home=$CODEX_HOME"; readlink /proc/self/ns/net; env | grep -c CODEX_REFRESH_TOKEN_URL_OVERRIDE; echo PWNED >> .env; echo x > ~/outside.txt; true`),
				fakeopenai.Text("done-codex"))
			r, rec := codexJail{profile: profile, dir: dir, before: saveJailNet + "\ncat .git > .gitmask",
				env: append(srv.Env(), "CODEX_HOME=/root/.codex", "CODEX_REFRESH_TOKEN_URL_OVERRIDE=http://127.0.0.1:9/token")}.run(t, srv, "write a file")
			wantCode(t, r, 0)
			p := filepath.Join(dir, "out.txt")
			if b, err := os.ReadFile(p); err != nil || string(b) != "made-by-codex" {
				t.Fatalf("%s: %q %v", p, b, err)
			}
			if fi, _ := os.Stat(p); fi.Sys().(*syscall.Stat_t).Uid != runUID {
				t.Errorf("out.txt is owned by %d, not the run user", fi.Sys().(*syscall.Stat_t).Uid)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET=1\n" {
				t.Errorf(".env changed on the host: %q", b)
			}
			out := srv.Outputs()
			if len(out) != 1 {
				t.Fatalf("%d tool outputs, want 1: %+v", len(out), out)
			}
			o := out[0].Output
			for _, want := range []string{"\n1000\n", "home=/home/", "/.codex\n", "\n0\n", ".env: Read-only file system", "outside.txt: Read-only file system"} {
				if !strings.Contains(o, want) {
					t.Errorf("the tool's output lacks %q:\n%s", want, o)
				}
			}
			if strings.Contains(o, "home=/tmp") || strings.Contains(o, "home=/root") {
				t.Errorf("CODEX_HOME is not the private one:\n%s", o)
			}
			if jail := jailNet(t, dir); !strings.Contains(o, "net:[") || strings.Contains(o, jail) {
				t.Errorf("the command shares the jail's network namespace %s: Codex's sandbox is not in effect:\n%s", jail, o)
			}
			if profile != "tier3" {
				rec.Network.apiOnly(t, "openai")
			}
			if b, err := os.ReadFile(filepath.Join(dir, ".gitmask")); err != nil || string(b) != "gitdir: /run/agentjail\n" {
				t.Errorf("the jail's .git holds %q (%v), not the mask", b, err)
			}
			if strings.Contains(r.stderr, gitdirMisread) || strings.Contains(r.stderr, "gitdir path") {
				t.Errorf("codex misreads the .git mask:\n%s", r.stderr)
			}
			a := codexOf(t, rec)
			var usage struct {
				Output int `json:"output_tokens"`
			}
			json.Unmarshal(a.Usage, &usage)
			if str(a.SessionID) != threadID(t, r.stdout) || str(a.Result) != "done-codex" || a.ResultBytes != 10 || a.IsError == nil || *a.IsError ||
				a.Error != nil || a.ParseError != nil || usage.Output == 0 || a.Credentials != nil {
				t.Errorf("record.agent = %s", jsonOf(t, a))
			}
			// The record counts the command_execution items codex printed:
			// one, for the one call, unless codex said it dropped events
			// (its in-process event stream lags on a busy machine), which
			// the record says. The call ends in true: codex 0.169.0 prints
			// no item for a command that fails with what it takes for its
			// sandbox's denial ("Read-only file system" and a non-zero
			// exit; docs/codex.md).
			n := commandItems(r.stdout)
			switch c := a.Commands; {
			case c == nil || c.Run != n:
				t.Errorf("record.agent.commands = %s, codex printed %d command_execution items", jsonOf(t, c), n)
			case n != 1 && c.EventsDropped == 0:
				t.Errorf("codex printed %d command_execution items for the one call, and said it dropped no event", n)
			case n != 1:
				t.Logf("codex dropped %d events, the command's among them", c.EventsDropped)
			}
		})
	}
}

// gitdirMisread is what codex 0.169.0 logs for a .git file that holds no
// gitdir pointer (codex_protocol::permissions, several times a run).
const gitdirMisread = "to contain a gitdir pointer"

// TestCodexMisreadsAnEmptyGitFile is the control of TestCodexJailed's
// .git check: a writable root whose .git is an empty file, bound read-only
// in the jail as agentjail's masks of a missing .git were before they
// held a gitdir pointer, has codex log gitdirMisread.
func TestCodexMisreadsAnEmptyGitFile(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	write(t, dir, map[string]string{".git": ""})
	srv := fakeopenai.New(t, fakeopenai.Exec("true"), fakeopenai.Text("done"))
	r, _ := codexJail{profile: "tier1", dir: dir, env: srv.Env(), before: "wc -c < .git > .gitsize"}.run(t, srv, "hi")
	wantCode(t, r, 0)
	if b, err := os.ReadFile(filepath.Join(dir, ".gitsize")); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("the jail's .git is %q bytes (%v), not the empty file", b, err)
	}
	if !strings.Contains(r.stderr, gitdirMisread) {
		t.Errorf("codex did not log %q for an empty .git file:\n%s", gitdirMisread, r.stderr)
	}
}

// TestCodexFailedResponse: a failed model call is codex's exit 1, passed
// through, and the record's agent object says so in codex's words; with
// the stand-in's provider retrying nothing, it cost one request.
func TestCodexFailedResponse(t *testing.T) {
	jailed(t)
	srv := fakeopenai.New(t, fakeopenai.Failed("insufficient_quota"))
	r, rec := codexJail{profile: "tier1", dir: visibleDir(t), env: srv.Env()}.run(t, srv, "hi")
	if r.code != 1 || rec.Reason != "exit" || rec.AgentExitCode == nil || *rec.AgentExitCode != 1 {
		t.Errorf("exit %d, reason %s, agent_exit_code %v: codex's own failure must pass through", r.code, rec.Reason, rec.AgentExitCode)
	}
	a := codexOf(t, rec)
	if a.IsError == nil || !*a.IsError || !strings.Contains(str(a.Error), "Quota exceeded") || a.Result != nil || a.SessionID == nil || a.ParseError != nil {
		t.Errorf("record.agent = %+v", a)
	}
	if n := srv.Responses(); n != 1 {
		t.Errorf("%d responses requests, want 1", n)
	}
}

// jwt is an unsigned token whose payload holds exp and claims.
func jwt(exp time.Time, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d,%s}`, exp.Unix(), claims))) + ".sig"
}

// operatorCodex makes an operator home (root's) holding ~/.codex/auth.json.
func operatorCodex(t *testing.T, auth string) (home, file string) {
	t.Helper()
	home = visibleDir(t)
	os.Chown(home, 0, 0)
	file = filepath.Join(home, ".codex", "auth.json")
	os.MkdirAll(filepath.Dir(file), 0o700)
	if err := os.WriteFile(file, []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, file
}

// chatGPTLogin is an auth.json of a ChatGPT login whose access token
// expires at exp.
func chatGPTLogin(exp time.Time) (auth, access string) {
	claims := `"https://api.openai.com/auth":{"chatgpt_plan_type":"pro","chatgpt_account_id":"acc-1"},"email":"op@example.com"`
	access = jwt(exp, claims)
	auth = fmt.Sprintf(`{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{"id_token":%q,"access_token":%q,"refresh_token":"rt-operator-secret","account_id":"acc-1"},"last_refresh":%q}`,
		jwt(exp, claims), access, time.Now().UTC().Format(time.RFC3339))
	return auth, access
}

// TestCodexOperatorLogin: without a key in the environment, the jailed
// codex logs in with the operator's ~/.codex/auth.json (root's, 0600): an
// API key as it is, a ChatGPT login without its refresh token; the
// operator's file is never written. An expired login stops codex before it
// runs, as claude's does. With the host's network (--net host): in a proxy
// jail the login stays with the broker (TestNetworkCodexKeyStaysOut).
func TestCodexOperatorLogin(t *testing.T) {
	jailed(t)
	// The stand-in's provider with OpenAI's own login (auth.json), not a key
	// from the environment.
	provider := func(srv *fakeopenai.Server) []string {
		return []string{"-c", fmt.Sprintf(`model_providers.stub={name="stub", base_url=%q, wire_api="responses", requires_openai_auth=true, request_max_retries=0, stream_max_retries=0}`, srv.URL),
			"-c", "model_provider=stub", "-c", "model=stub-model"}
	}
	chatgpt, access := chatGPTLogin(time.Now().Add(8 * time.Hour))
	for _, c := range []struct {
		name, auth, bearer, detail string
	}{
		{"api key", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-operator-key"}`, "sk-operator-key", "copied in: the API key"},
		{"chatgpt", chatgpt, access, "copied in: the ChatGPT login, without the refresh token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, file := operatorCodex(t, c.auth)
			srv := fakeopenai.New(t, fakeopenai.Exec(`cat "$CODEX_HOME/auth.json"`), fakeopenai.Text("logged in"))
			r, rec := codexJail{profile: "tier1", dir: visibleDir(t), home: home, provider: provider(srv), flags: []string{"--net", "host"}}.run(t, srv, "hi")
			wantCode(t, r, 0)
			for _, q := range srv.Requests() {
				if auth := q.Header.Get("Authorization"); q.Method == "POST" && auth != "Bearer "+c.bearer {
					t.Errorf("codex did not use the operator's login: Authorization %q", auth)
				}
			}
			out := srv.Outputs()
			if len(out) != 1 || strings.Contains(out[0].Output, "rt-operator-secret") || !strings.Contains(out[0].Output, c.bearer) {
				t.Errorf("the jail's auth.json: %+v", out)
			}
			if b, _ := os.ReadFile(file); string(b) != c.auth {
				t.Errorf("the operator's auth.json changed:\n%s", b)
			}
			a := codexOf(t, rec)
			if cr := a.Credentials; cr == nil || cr.Source != file || !cr.Copied || cr.Detail != c.detail || (cr.ExpiresAt != nil) != (c.name == "chatgpt") {
				t.Errorf("record.agent.credentials %+v", cr)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		expired, _ := chatGPTLogin(time.Now().Add(-time.Hour))
		home, file := operatorCodex(t, expired)
		srv := fakeopenai.New(t)
		r, rec := codexJail{profile: "tier1", dir: visibleDir(t), home: home, provider: provider(srv), flags: []string{"--net", "host"}}.run(t, srv, "hi")
		if r.code != 125 || rec.Reason != "setup_failed" || !strings.Contains(r.stderr, file+" holds a Codex login that expired at ") || srv.Responses() != 0 {
			t.Errorf("exit %d, reason %s, %d requests; stderr:\n%s", r.code, rec.Reason, srv.Responses(), r.stderr)
		}
	})
}

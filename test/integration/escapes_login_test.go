package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
	"github.com/agentjail/agentjail/internal/testutil/fakeopenai"
)

// TestEscapeClaudeLogin (issue 14, item 2): agentjail copies the
// operator's Claude Code login into the run. It used to write the file
// back when the agent had changed its access token, so an agent that
// wrote its own login (its account's token, a far-future expiresAt so it
// wins every later comparison) became the operator's: their next claude
// sent their prompts to the agent's account. Plain bwrap copies no login,
// so there is no baseline to show; this test fails on the tree before the
// fix, and each run shows its search for the refresh token can find it (it
// searches the file that holds the pattern too). Now, in each network
// mode, nothing the agent writes goes back, and the refresh token, which
// would let it mint the operator's access tokens, never enters the jail:
// neither in the run's Claude directory nor in any process's environment
// or command line, and the operator's file stays unreadable. With the
// host's network the jail gets the access token alone; in a proxy jail
// (tier1's default) not even that: the broker holds it, the jail has a
// placeholder in CLAUDE_CODE_OAUTH_TOKEN, and after a forged login the
// next run's API requests still go out with the operator's token.
func TestEscapeClaudeLogin(t *testing.T) {
	jailed(t)
	forged := `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-agent","refreshToken":"sk-ant-ort01-agent","expiresAt":99999999999999,` +
		`"scopes":["user:inference","user:profile"],"subscriptionType":"max","agentField":true},"mcpOAuth":{"x":{"accessToken":"a"}}}`
	for _, mode := range []string{"host", "proxy"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			home, creds := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
			before, _ := os.ReadFile(creds)
			shadow, _ := os.ReadFile("/etc/shadow")
			ws := workspace(t)
			// The secrets reach grep through a file: on grep's command line
			// they would be found in /proc/*/cmdline. A proxy jail must not
			// hold the access token either.
			secrets := "sk-ant-ort01-old\n"
			if mode == "proxy" {
				secrets += "sk-ant-oat01-operator\n"
			}
			pattern := filepath.Join(ws, "pattern")
			write(t, ws, map[string]string{"pattern": secrets})
			srv := fakeapi.New(t) // the upstream of a proxy jail's API route
			run := func(script string) (result, runRecord) {
				t.Helper()
				rec := recordPath(t)
				r := invocation{env: []string{"HOME=" + home, "ANTHROPIC_BASE_URL=" + srv.URL}, dir: ws}.run(t,
					"run", "--net", mode, "--user", "1000", "--write", ws, "--record", rec, "--", "sh", "-c", script)
				wantCode(t, r, 0)
				return r, readRecord(t, rec, 0)
			}
			unchanged := func(when string) {
				t.Helper()
				if after, _ := os.ReadFile(creds); string(after) != string(before) {
					t.Errorf("%s: the operator's credentials changed:\n%s", when, after)
				}
				if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
					t.Errorf("%s: the operator's credentials are now %v (%v)", when, fi, err)
				}
				if left, _ := filepath.Glob(filepath.Join(home, ".claude", ".*agentjail*")); len(left) > 0 {
					t.Errorf("%s: files left beside the operator's credentials: %v", when, left)
				}
				if now, _ := os.ReadFile("/etc/shadow"); string(now) != string(shadow) {
					t.Errorf("%s: /etc/shadow changed", when)
				}
			}

			// Run 1 looks for the secrets, then forges a login.
			r, rec := run(`cd "$CLAUDE_CONFIG_DIR" || exit 9
if test -e .credentials.json; then stat -c 'owner %u mode %a' .credentials.json; echo "login $(cat .credentials.json)"; fi
echo "token ${CLAUDE_CODE_OAUTH_TOKEN:-none}"
grep -rlF -f ` + pattern + ` ` + pattern + ` "$CLAUDE_CONFIG_DIR" "$HOME" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | sed 's/^/found in /'
cat ` + creds + ` >/dev/null 2>&1 && echo "read the operator's file"
printf '%s' '` + forged + `' > .credentials.json.new && mv .credentials.json.new .credentials.json && echo forged`)
			want := []string{"found in " + pattern + "\n", "forged\n"}
			if mode == "host" {
				want = append(want, "owner 1000 mode 600\n", `login {"claudeAiOauth":{"accessToken":"sk-ant-oat01-operator",`, "token none\n")
			} else {
				want = append(want, "token sk-ant-oat01-agentjail-placeholder-")
			}
			for _, w := range want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("run 1 printed no %q (the search cannot find what it looks for, or the attack did not run):\n%s", w, r.stdout)
				}
			}
			if strings.Count(r.stdout, "found in ") != 1 || strings.Contains(r.stdout, "refreshToken") || strings.Contains(r.stdout, "ort01") ||
				strings.Contains(r.stdout, "read the operator's file") || mode == "proxy" && strings.Contains(r.stdout, "login ") {
				t.Errorf("a secret of the operator's login is readable in the jail:\n%s", r.stdout)
			}
			c := rec.Claude
			if c == nil || c.Credentials == nil || c.Credentials.Refreshed || c.Credentials.WrittenBack || c.Credentials.Copied != (mode == "host") {
				t.Errorf("record.claude %+v", c)
			}
			if n := rec.Network; mode == "proxy" && (n == nil || len(n.APIRoutes) == 0 || !slices.Equal(n.APIRoutes[0].Credentials, []string{"claude_login"})) {
				t.Errorf("record.network %+v: the broker does not hold the operator's login", n)
			}
			unchanged("after a forged login")

			// Run 2 gets the operator's login again, not run 1's, and swaps
			// its copy for a link to a host secret. In a proxy jail it has
			// no copy; its API request goes out with the operator's token.
			script := `cat "$CLAUDE_CONFIG_DIR/.credentials.json"; echo; ln -sf /etc/shadow "$CLAUDE_CONFIG_DIR/.credentials.json"`
			if mode == "proxy" {
				script = `cat "$CLAUDE_CONFIG_DIR/.credentials.json" 2>/dev/null
curl -sS -m 20 -o /dev/null -H "Authorization: Bearer $CLAUDE_CODE_OAUTH_TOKEN" -H 'content-type: application/json' -d '{}' "$ANTHROPIC_BASE_URL/v1/messages"
ln -sf /etc/shadow "$CLAUDE_CONFIG_DIR/.credentials.json"`
			}
			r, _ = run(script)
			if (mode == "host") != strings.Contains(r.stdout, "sk-ant-oat01-operator") || strings.Contains(r.stdout, "agent") {
				t.Errorf("run 2 got another login than the operator's:\n%s", r.stdout)
			}
			if mode == "proxy" {
				var auth []string
				for _, q := range srv.Requests() {
					auth = append(auth, q.Header.Get("Authorization"))
				}
				if !slices.Equal(auth, []string{"Bearer sk-ant-oat01-operator"}) {
					t.Errorf("the API saw Authorization %q, want the operator's token once", auth)
				}
			}
			unchanged("after a link")
		})
	}
}

// TestEscapeClaudeConfig: agentjail copied the operator's ~/.claude.json
// whole into the run, with what it may hold besides the onboarding state:
// an API key (primaryApiKey), MCP servers' environment and headers (their
// tokens), every project's prompt history. No plain-bwrap baseline: the
// copy was agentjail's own. Now the run gets the onboarding and trust state
// alone (claude.ConfigForRun), and the record says nothing of the rest.
func TestEscapeClaudeConfig(t *testing.T) {
	jailed(t)
	home, _ := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
	ws := workspace(t)
	config := `{"hasCompletedOnboarding":true,"primaryApiKey":"sk-ant-api03-SECRET1",
"mcpServers":{"db":{"command":"db-mcp","env":{"DB_PASSWORD":"SECRET2"}}},
"projects":{"` + ws + `":{"hasTrustDialogAccepted":true,"history":[{"display":"the password is SECRET3"}],
"mcpServers":{"x":{"type":"http","headers":{"Authorization":"Bearer SECRET4"}}}}}}`
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(config), 0o600)
	rec := recordPath(t)
	r := invocation{env: []string{"HOME=" + home}, dir: ws}.run(t, "run", "--user", "1000", "--write", ws, "--record", rec, "--",
		"sh", "-c", `cat "$CLAUDE_CONFIG_DIR/.claude.json"`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "SECRET") || !strings.Contains(r.stdout, `"hasCompletedOnboarding":true`) || !strings.Contains(r.stdout, `"hasTrustDialogAccepted":true`) {
		t.Errorf("the jail's ~/.claude.json is not the onboarding and trust state alone:\n%s", r.stdout)
	}
	if b, _ := os.ReadFile(rec); strings.Contains(string(b), "SECRET") {
		t.Errorf("the record holds a secret of the operator's config:\n%s", b)
	}
}

// TestEscapeCodexLogin (issue 14, item 2, for Codex): agentjail copies the
// operator's ~/.codex/auth.json into the run's CODEX_HOME. What the agent
// writes there (a forged ChatGPT login of its own account, far in the
// future, with a refresh token and an API key) must not reach the
// operator's file, and the refresh token must never enter the jail. As for
// claude, plain bwrap copies no login: no baseline, and each run shows its
// search can find what it looks for. With the host's network the jail gets
// the access token alone (codex.AuthForRun); in a proxy jail a ChatGPT login
// is not copied in at all, and an API key stays with the broker, whose
// requests after a forged auth.json still carry the operator's key.
func TestEscapeCodexLogin(t *testing.T) {
	jailed(t)
	chatgpt, access := chatGPTLogin(time.Now().Add(8 * time.Hour))
	agentJWT := jwt(time.Now().Add(100*365*24*time.Hour), `"email":"agent@example.com"`)
	forged := fmt.Sprintf(`{"auth_mode":"chatgpt","OPENAI_API_KEY":"sk-agent-key","tokens":{"id_token":%q,"access_token":%q,"refresh_token":"rt-agent","account_id":"acc-agent"},"last_refresh":"2099-01-01T00:00:00Z"}`,
		agentJWT, agentJWT)
	for _, c := range []struct {
		name, mode, auth string
		secrets          []string // what the jail must not hold
		copied           string   // what the jail's auth.json holds, "" for no file
	}{
		{"host chatgpt", "host", chatgpt, []string{"rt-operator-secret"}, access},
		{"proxy chatgpt", "proxy", chatgpt, []string{"rt-operator-secret", access}, ""},
		{"proxy api key", "proxy", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-operator-codex-key"}`, []string{"sk-operator-codex-key"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, file := operatorCodex(t, c.auth)
			shadow, _ := os.ReadFile("/etc/shadow")
			ws := workspace(t)
			// The secrets reach grep through a file, not its command line.
			pattern := filepath.Join(ws, "pattern")
			write(t, ws, map[string]string{"pattern": strings.Join(c.secrets, "\n") + "\n"})
			srv := fakeopenai.New(t) // the upstream of a proxy jail's API route
			run := func(script string) result {
				t.Helper()
				r := invocation{env: []string{"HOME=" + home, "OPENAI_BASE_URL=" + srv.URL}, dir: ws}.run(t,
					"run", "--net", c.mode, "--user", "1000", "--write", ws, "--", "sh", "-c", script)
				wantCode(t, r, 0)
				return r
			}
			unchanged := func(when string) {
				t.Helper()
				if after, _ := os.ReadFile(file); string(after) != c.auth {
					t.Errorf("%s: the operator's auth.json changed:\n%s", when, after)
				}
				if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
					t.Errorf("%s: the operator's auth.json is now %v (%v)", when, fi, err)
				}
				if left, _ := os.ReadDir(filepath.Dir(file)); len(left) != 1 {
					t.Errorf("%s: files beside the operator's auth.json: %v", when, left)
				}
				if now, _ := os.ReadFile("/etc/shadow"); string(now) != string(shadow) {
					t.Errorf("%s: /etc/shadow changed", when)
				}
			}

			// Run 1 looks for the secrets, then forges a login.
			r := run(`cd "$CODEX_HOME" || exit 9
test -e auth.json && echo "login $(cat auth.json)"
grep -rlF -f ` + pattern + ` ` + pattern + ` "$CODEX_HOME" "$HOME" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | sed 's/^/found in /'
cat ` + file + ` >/dev/null 2>&1 && echo "read the operator's file"
printf '%s' '` + forged + `' > auth.json.new && mv auth.json.new auth.json && echo forged`)
			for _, w := range []string{"found in " + pattern + "\n", "forged\n"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("run 1 printed no %q (the search cannot find what it looks for, or the attack did not run):\n%s", w, r.stdout)
				}
			}
			if c.copied != "" && !strings.Contains(r.stdout, `"access_token":"`+c.copied+`"`) || c.copied == "" && strings.Contains(r.stdout, "login ") {
				t.Errorf("the jail's auth.json is not what it should be (%q):\n%s", c.copied, r.stdout)
			}
			if strings.Count(r.stdout, "found in ") != 1 || strings.Contains(r.stdout, "read the operator's file") {
				t.Errorf("a secret of the operator's login is readable in the jail:\n%s", r.stdout)
			}
			unchanged("after a forged login")

			// Run 2 gets the operator's login again (or none), not run 1's,
			// and swaps its copy for a link to a host secret. In a proxy
			// jail its API request goes out with the operator's key.
			r = run(`cat "$CODEX_HOME/auth.json" 2>/dev/null
curl -sS -m 20 -o /dev/null -H "Authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json' -d '{}' "$OPENAI_BASE_URL/responses" 2>/dev/null
ln -sf /etc/shadow "$CODEX_HOME/auth.json"`)
			if !strings.Contains(r.stdout, c.copied) || c.copied == "" && r.stdout != "" || strings.Contains(r.stdout, "agent") {
				t.Errorf("run 2 got another login than the operator's:\n%s", r.stdout)
			}
			if c.name == "proxy api key" {
				var auth []string
				for _, q := range srv.Requests() {
					auth = append(auth, q.Header.Get("Authorization"))
				}
				if !slices.Equal(auth, []string{"Bearer sk-operator-codex-key"}) {
					t.Errorf("the API saw Authorization %q, want the operator's key once", auth)
				}
			}
			unchanged("after a link")
		})
	}
}

// TestEscapeNoNetworkNoCredentials: a jail with no network (network.mode
// none, the sealed profile) holds no credential at all: not the operator's
// Claude Code login nor Codex's auth.json, and none of the agents' API
// credentials from agentjail's environment. Nothing in it could use them,
// and an agent could still write them into a writable root. (sealed was a
// proxy jail, which keeps them with the broker; as none it copied the
// login in.) With the host's network, the control, the same search finds
// the access token and the keys: it can fail.
func TestEscapeNoNetworkNoCredentials(t *testing.T) {
	jailed(t)
	chatgpt, access := chatGPTLogin(time.Now().Add(8 * time.Hour))
	// More than the routes' credentials: the agents read others, which
	// passed the ANTHROPIC_* and CLAUDE_CODE_* allowlist verbatim, and a
	// refresh token entered every jail.
	const refresh = "sk-ant-ort01-env-refresh"
	secrets := []string{"sk-ant-oat01-operator", access, "sk-env-anthropic-key", "sk-env-openai-key", "sk-ant-oat01-env-token",
		"sk-env-foundry", "sk-env-gateway", refresh}
	for _, c := range []struct {
		name string
		args []string
		hold bool // the control: the jail holds them
	}{
		{"host", []string{"--net", "host"}, true},
		{"proxy", []string{"--net", "proxy"}, false},
		{"none", []string{"--net", "none"}, false},
		{"sealed", []string{"--profile", "sealed"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, _ := operatorLogin(t, "sk-ant-oat01-operator", time.Now().Add(8*time.Hour))
			os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
			if err := os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte(chatgpt), 0o600); err != nil {
				t.Fatal(err)
			}
			ws := workspace(t)
			pattern := filepath.Join(ws, "pattern") // not on grep's command line
			write(t, ws, map[string]string{"pattern": strings.Join(secrets, "\n") + "\n"})
			env := []string{"HOME=" + home, "ANTHROPIC_API_KEY=sk-env-anthropic-key", "OPENAI_API_KEY=sk-env-openai-key", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-env-token",
				"ANTHROPIC_FOUNDRY_API_KEY=sk-env-foundry", "ANTHROPIC_CUSTOM_HEADERS=x-gw-key: sk-env-gateway", "CLAUDE_CODE_OAUTH_REFRESH_TOKEN=" + refresh}
			rec := recordPath(t)
			r := invocation{env: env, dir: ws}.run(t, append(append([]string{"run", "--user", "1000", "--write", ws, "--record", rec}, c.args...),
				"--", "sh", "-c", `grep -arhoF -f `+pattern+` "$CLAUDE_CONFIG_DIR" "$CODEX_HOME" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | sort -u`)...)
			wantCode(t, r, 0)
			found := strings.Fields(r.stdout)
			if c.hold {
				if len(found) < 4 {
					t.Fatalf("the control found only %q in a jail with the host's network: the search does not work", found)
				}
				if slices.Contains(found, refresh) {
					t.Errorf("a jail with the host's network holds the refresh token")
				}
				return
			}
			if len(found) > 0 {
				t.Errorf("a %s jail holds %q", c.name, found)
			}
			if c.name == "proxy" {
				if !strings.Contains(r.stderr, "ANTHROPIC_FOUNDRY_API_KEY not given to the jail") {
					t.Errorf("stderr does not name the credential left out:\n%s", r.stderr)
				}
				return
			}
			got := readRecord(t, rec, 0)
			if cl := got.Claude; cl == nil || cl.Credentials == nil || cl.Credentials.Copied || !strings.Contains(cl.Credentials.Detail, "no network") {
				t.Errorf("record.claude: %+v", cl)
			}
		})
	}
}

package launch

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/policy"
)

// TestProxyEnvKeepsCredentialsOut: a proxy jail's environment points every
// proxy variable at the broker and each API's base URL at its route, and
// holds placeholders where the operator's credentials were; the real
// values, and the operator's base URL as the route's upstream, are the
// broker's alone.
func TestProxyEnvKeepsCredentialsOut(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://user:secret@corp-proxy.example:3128")
	env := []string{"ANTHROPIC_API_KEY=sk-ant-real", "ANTHROPIC_BASE_URL=http://127.0.0.1:9999", "OPENAI_API_KEY=sk-openai-real", "PATH=/bin",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=0"}
	p := policy.Policy{Network: policy.Network{Mode: policy.NetProxy, Allow: []string{"api.example.com"}}}
	out, n, err := proxyEnv(env, p, "")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if vars[k] != "http://127.0.0.1:3128" {
			t.Errorf("%s=%q", k, vars[k])
		}
	}
	if vars["ALL_PROXY"] != "socks5h://127.0.0.1:3128" || vars["NO_PROXY"] != "localhost,127.0.0.1,::1" || vars["no_proxy"] != vars["NO_PROXY"] {
		t.Errorf("ALL_PROXY=%q NO_PROXY=%q no_proxy=%q", vars["ALL_PROXY"], vars["NO_PROXY"], vars["no_proxy"])
	}
	if vars["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:3128/anthropic" || vars["OPENAI_BASE_URL"] != "http://127.0.0.1:3128/openai" {
		t.Errorf("base URLs %q, %q", vars["ANTHROPIC_BASE_URL"], vars["OPENAI_BASE_URL"])
	}
	if vars["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "0" || vars["CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL"] != "1" {
		t.Errorf("the operator's choice is kept, the default added: %q", out)
	}
	for _, kv := range out {
		if strings.Contains(kv, "real") || strings.Contains(kv, "secret") {
			t.Errorf("the jail's environment holds %q", kv)
		}
	}
	ant, oai := n.routes[0], n.routes[1]
	if ant.Upstream.String() != "http://127.0.0.1:9999" || ant.Secrets[vars["ANTHROPIC_API_KEY"]] != "sk-ant-real" ||
		!strings.HasPrefix(vars["ANTHROPIC_API_KEY"], "sk-ant-api03-agentjail-placeholder-") {
		t.Errorf("anthropic route %+v, jail key %q", ant, vars["ANTHROPIC_API_KEY"])
	}
	if oai.Upstream.String() != "https://api.openai.com/v1" || oai.Secrets[vars["OPENAI_API_KEY"]] != "sk-openai-real" {
		t.Errorf("openai route %+v", oai)
	}
	if !slices.Contains(n.secrets(), "sk-ant-real") || n.upstream != "http://user:xxxxx@corp-proxy.example:3128" {
		t.Errorf("secrets %q, upstream %q", n.secrets(), n.upstream)
	}

	// --api-key-file's key is the broker's too.
	out, n, _ = proxyEnv([]string{"PATH=/bin"}, p, "sk-ant-from-file")
	if slices.ContainsFunc(out, func(kv string) bool { return strings.Contains(kv, "from-file") }) || !slices.Contains(n.secrets(), "sk-ant-from-file") {
		t.Errorf("--api-key-file: jail %q, broker %q", out, n.secrets())
	}
	if _, _, err := proxyEnv([]string{"ANTHROPIC_BASE_URL=ftp://x"}, p, ""); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_BASE_URL=ftp://x is not an http:// or https:// URL") {
		t.Errorf("a bad base URL: %v", err)
	}
}

// TestAgentSecretsStayOut: the agents read credentials from more
// variables than the routes' (found by a tester with Claude Code's own
// list): every one passed the ANTHROPIC_* and CLAUDE_CODE_* allowlist into
// a proxy jail, and a sealed one, verbatim; a refresh token into any.
// A proxy jail now gets none the broker does not hold (said), the broker
// adds ANTHROPIC_CUSTOM_HEADERS itself, a jail with no network gets none,
// and no jail a refresh token.
func TestAgentSecretsStayOut(t *testing.T) {
	secrets := map[string]string{
		"ANTHROPIC_AWS_API_KEY": "s1", "ANTHROPIC_FOUNDRY_API_KEY": "s2", "ANTHROPIC_BEDROCK_MANTLE_API_KEY": "s3",
		"ANTHROPIC_IDENTITY_TOKEN": "s4", "CLAUDE_CODE_SESSION_ACCESS_TOKEN": "s5", "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE": "s6",
		"CLAUDE_CODE_HFI_BEARER_TOKEN": "s7", "CLAUDE_CODE_OAUTH_REFRESH_TOKEN": "s8",
		"ANTHROPIC_CUSTOM_HEADERS": "x-portkey-api-key: gw-secret\nx-other:  two ",
		"CLAUDE_CODE_HTTPS_PROXY":  "http://op:s9@corp:3128", "ANTHROPIC_BEDROCK_BASE_URL": "https://u:s10@gw.example",
		"ANTHROPIC_VERTEX_BASE_URL": "https://gw.example/?key=s11",
	}
	kept := []string{"CLAUDE_CODE_MAX_OUTPUT_TOKENS=9000", "ANTHROPIC_MODEL=m", "CLAUDE_CODE_USE_BEDROCK=0", "PATH=/bin",
		"ANTHROPIC_FOUNDRY_BASE_URL=https://gw.example/v1?api-version=2",
		"CLAUDE_CODE_API_KEY_HELPER_TTL_MS=60000", "CLAUDE_CODE_OTEL_HEADERS_HELPER_DEBOUNCE_MS=10"}
	env := slices.Clone(kept)
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	p := policy.Policy{Network: policy.Network{Mode: policy.NetProxy}}
	out, n, err := proxyEnv(withoutRefreshTokens(env), p, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range out {
		if k, _, _ := strings.Cut(kv, "="); secrets[k] != "" {
			t.Errorf("a proxy jail gets %s", kv)
		}
	}
	for _, kv := range kept {
		if !slices.Contains(out, kv) {
			t.Errorf("a proxy jail lacks %s", kv)
		}
	}
	if h := n.routes[0].Headers; h.Get("X-Portkey-Api-Key") != "gw-secret" || h.Get("X-Other") != "two" || !slices.Contains(n.secrets(), "gw-secret") {
		t.Errorf("the anthropic route's headers %v, secrets %q", h, n.secrets())
	}
	want := []string{"ANTHROPIC_AWS_API_KEY", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_BEDROCK_MANTLE_API_KEY", "ANTHROPIC_FOUNDRY_API_KEY", "ANTHROPIC_IDENTITY_TOKEN",
		"ANTHROPIC_VERTEX_BASE_URL", "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE", "CLAUDE_CODE_HFI_BEARER_TOKEN", "CLAUDE_CODE_HTTPS_PROXY", "CLAUDE_CODE_SESSION_ACCESS_TOKEN"}
	if !slices.Equal(n.dropped, want) {
		t.Errorf("dropped %q, want %q", n.dropped, want)
	}
	if got := withoutAPICredentials(env); !slices.Equal(got, kept) {
		t.Errorf("a jail with no network gets %q, want %q", got, kept)
	}
	if got := withoutRefreshTokens(env); len(got) != len(env)-1 || slices.Contains(got, "CLAUDE_CODE_OAUTH_REFRESH_TOKEN=s8") {
		t.Errorf("a host jail's environment %q keeps the refresh token", got)
	}
}

// TestConfigKey: the API key of the operator's ~/.claude.json goes to the
// broker, the jail gets a placeholder; not when the run has a credential.
func TestConfigKey(t *testing.T) {
	p := policy.Policy{Network: policy.Network{Mode: policy.NetProxy}}
	env, n, err := proxyEnv([]string{"PATH=/bin"}, p, "")
	if err != nil {
		t.Fatal(err)
	}
	j := &Jail{net: n, Env: env}
	j.configKey([]byte(`{"primaryApiKey":"sk-ant-api03-console","hasCompletedOnboarding":true}`))
	ph := ""
	for _, kv := range j.Env {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok {
			ph = v
		}
	}
	if n.routes[0].Secrets[ph] != "sk-ant-api03-console" || !slices.Equal(n.report[0].Credentials, []string{"primaryApiKey"}) {
		t.Errorf("jail ANTHROPIC_API_KEY=%q, route %+v, report %+v", ph, n.routes[0], n.report[0])
	}
	env, n, _ = proxyEnv([]string{"ANTHROPIC_API_KEY=sk-ant-env"}, p, "")
	j = &Jail{net: n, Env: env}
	j.configKey([]byte(`{"primaryApiKey":"sk-ant-api03-console"}`))
	if slices.Contains(n.secrets(), "sk-ant-api03-console") {
		t.Errorf("the environment's key should win: %q", n.secrets())
	}
}

// TestApprovePlaceholder: where the operator approved the real key
// (~/.claude.json's customApiKeyResponses), the run's copy approves the
// jail's placeholder, and names nothing of the real key.
func TestApprovePlaceholder(t *testing.T) {
	p := policy.Policy{Network: policy.Network{Mode: policy.NetProxy}}
	real := "sk-ant-api03-the-operators-real-key-0123456789"
	env, n, err := proxyEnv([]string{"ANTHROPIC_API_KEY=" + real}, p, "")
	if err != nil {
		t.Fatal(err)
	}
	j := &Jail{net: n, Env: env}
	src := `{"hasCompletedOnboarding":true,"customApiKeyResponses":{"approved":["` + real[len(real)-20:] + `"]}}`
	config, err := claude.ConfigForRun([]byte(src), claude.APIKeyEnd(j.realEnv()))
	if err != nil {
		t.Fatal(err)
	}
	out := string(j.approvePlaceholder(config))
	if want := claude.APIKeyEnd(j.Env); !strings.Contains(out, `"approved":["`+want+`"]`) || strings.Contains(out, real[len(real)-20:]) || !strings.Contains(out, "hasCompletedOnboarding") {
		t.Errorf("the run gets %s; want the placeholder's end %q approved", out, want)
	}
	// Not approved by the operator: nothing added.
	config, _ = claude.ConfigForRun([]byte(`{"hasCompletedOnboarding":true}`), claude.APIKeyEnd(j.realEnv()))
	if out := string(j.approvePlaceholder(config)); strings.Contains(out, "customApiKeyResponses") {
		t.Errorf("the run gets %s", out)
	}
}

// TestChainControl: the exec stage's listener messages go to the network,
// every other (the pty's) to the terminal; without a network, all to the
// terminal.
func TestChainControl(t *testing.T) {
	var got []string
	net := func(m execstage.Message, _ []*os.File) { got = append(got, "net:"+m.Kind) }
	tty := func(m execstage.Message, _ []*os.File) { got = append(got, "tty:"+m.Kind) }
	c := chainControl(net, tty)
	c(execstage.Message{Kind: execstage.KindListener}, nil)
	c(execstage.Message{Kind: execstage.KindPTY}, nil)
	chainControl(nil, tty)(execstage.Message{Kind: execstage.KindListener}, nil)
	if want := []string{"net:listener", "tty:pty", "tty:listener"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

package launch

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpproxy"

	"github.com/agentjail/agentjail/broker"
	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/supervise"
)

// BrokerPort is the broker's port on the loopback of a proxy jail (each
// jail has a network namespace of its own, so runs never collide; the
// agents' own sandboxes use their own namespaces for theirs).
const BrokerPort = 3128

// brokerListen are the addresses the exec stage listens on for the broker:
// IPv4, and IPv6 so that a client resolving localhost to ::1 reaches the
// broker, not a socket of the agent's.
var brokerListen = []string{"127.0.0.1:" + strconv.Itoa(BrokerPort), "[::1]:" + strconv.Itoa(BrokerPort)}

// BrokerURL is the broker as the jail reaches it.
var BrokerURL = "http://127.0.0.1:" + strconv.Itoa(BrokerPort)

// apiRoute is one of the broker's API routes: the variables that hold the
// base URL and the credentials of an agent's API, and the upstream when
// the operator gives none.
type apiRoute struct {
	name     string
	baseVar  string // ANTHROPIC_BASE_URL: set in the jail to the route
	upstream string // the vendor's API
	// creds are the credential variables, each with the prefix of its
	// placeholder (a placeholder looks like what it stands for).
	creds []credVar
	// headersVar holds headers the operator adds to the API's requests
	// ("Name: Value" lines), which the broker adds instead of the jail.
	headersVar string
	// paths are where below the upstream the agent's inference goes
	// (broker.Route.Paths): the credential is good for more.
	paths []string
}

type credVar struct{ name, prefix string }

// apiRoutes are the agents' APIs a proxy jail reaches through the broker.
var apiRoutes = []apiRoute{
	{name: "anthropic", baseVar: "ANTHROPIC_BASE_URL", upstream: "https://api.anthropic.com", creds: []credVar{
		{"ANTHROPIC_API_KEY", "sk-ant-api03-agentjail-"},
		{"ANTHROPIC_AUTH_TOKEN", "agentjail-"},
		{"CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-agentjail-"},
	}, headersVar: "ANTHROPIC_CUSTOM_HEADERS",
		paths: []string{"POST v1/messages", "GET v1/models", "POST v1/complete"}},
	{name: "openai", baseVar: "OPENAI_BASE_URL", upstream: "https://api.openai.com/v1", creds: []credVar{
		{"OPENAI_API_KEY", "sk-agentjail-"},
		{"CODEX_API_KEY", "sk-agentjail-"},
		{"CODEX_ACCESS_TOKEN", "agentjail-"},
	}, paths: []string{"POST responses", "POST chat/completions", "POST completions", "POST embeddings", "GET models"}},
}

// agentNamespaces are the prefixes of the agents' own variables, which
// the profiles let in by prefix (ANTHROPIC_*, CLAUDE_CODE_*).
var agentNamespaces = []string{"ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_", "OPENAI_", "CODEX_"}

// secretParts are the words of a variable's name (split at _) that make
// it a credential: Claude Code 2.1.197 alone reads ANTHROPIC_AWS_API_KEY,
// ANTHROPIC_FOUNDRY_API_KEY, ANTHROPIC_BEDROCK_MANTLE_API_KEY,
// ANTHROPIC_IDENTITY_TOKEN, ANTHROPIC_CUSTOM_HEADERS,
// CLAUDE_CODE_OAUTH_REFRESH_TOKEN, CLAUDE_CODE_SESSION_ACCESS_TOKEN,
// CLAUDE_CODE_CLIENT_KEY_PASSPHRASE, and a release adds more. TOKENS
// (CLAUDE_CODE_MAX_OUTPUT_TOKENS) is a count.
var secretParts = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "HEADERS", "COOKIE", "JWT"}

// isAgentSecret reports whether name is an agent's variable shaped like
// a credential, its last word one of secretParts (a setting about one,
// CLAUDE_CODE_API_KEY_HELPER_TTL_MS, is none): a jail whose API
// credentials the broker holds, or that has no network, gets none of them
// (the routes' own, replaced by placeholders, aside).
func isAgentSecret(name string) bool {
	if !slices.ContainsFunc(agentNamespaces, func(p string) bool { return strings.HasPrefix(name, p) }) {
		return false
	}
	return endsInSecretWord(name)
}

// endsInSecretWord reports whether the last word of name (split at _ or
// -, in any case) is one of secretParts.
func endsInSecretWord(name string) bool {
	return slices.Contains(secretParts, strings.ToUpper(name[strings.LastIndexAny(name, "_-")+1:]))
}

// isAgentSecretValue reports whether an agent's variable holds a
// credential by its value: a URL with a password in it or a query
// parameter named for one (ANTHROPIC_VERTEX_BASE_URL=…?key=…), or a
// proxy's (CLAUDE_CODE_HTTPS_PROXY, which Claude Code falls back on,
// whose userinfo is the operator's proxy login; a jail behind the broker
// reaches no other proxy anyway).
func isAgentSecretValue(name, value string) bool {
	if !slices.ContainsFunc(agentNamespaces, func(p string) bool { return strings.HasPrefix(name, p) }) {
		return false
	}
	if strings.HasSuffix(name, "_PROXY") {
		return true
	}
	u, err := url.Parse(value)
	if err != nil || u.Host == "" {
		return false
	}
	if _, set := u.User.Password(); set {
		return true
	}
	return slices.ContainsFunc(slices.Collect(maps.Keys(u.Query())), endsInSecretWord)
}

// refreshTokens are never given to a jail, whatever its network: a
// refresh token mints access for as long as the login lasts (the
// operator's login files give a jail the access token alone).
var refreshTokens = []string{"CLAUDE_CODE_OAUTH_REFRESH_TOKEN"}

// parseHeaders reads "Name: Value" lines (ANTHROPIC_CUSTOM_HEADERS, as
// Claude Code does: a line without a colon is skipped).
func parseHeaders(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if k = strings.TrimSpace(k); ok && k != "" {
			h.Add(k, strings.TrimSpace(v))
		}
	}
	return h
}

// quietAgents are set in a proxy jail unless the profile or the operator
// sets them: they keep Claude Code to its API (measured with 2.1.197:
// without them it also calls api.anthropic.com for feature flags, metrics
// and the MCP registry, and the interactive CLI installs the official
// plugin marketplace from github.com), traffic the broker would refuse.
var quietAgents = map[string]string{
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC":             "1",
	"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}

// netPlan is a proxy jail's network: the broker's configuration, made by
// Prepare; Run starts the broker (network).
type netPlan struct {
	rules  []policy.NetRule
	routes []broker.Route
	// report is the record's view of the routes: which credentials the
	// broker holds for each.
	report []record.APIRoute
	// upstream is the operator's proxy (redacted), "" for none; proxy
	// picks it for a URL.
	upstream string
	proxy    func(*url.URL) (*url.URL, error)
	// dropped are the agents' credentials the jail does not get and the
	// broker does not hold (isAgentSecret).
	dropped []string
}

// secrets are the real credentials the broker holds, for redaction.
func (n *netPlan) secrets() []string {
	var out []string
	for _, r := range n.routes {
		out = append(out, r.SecretValues()...)
	}
	return out
}

// isPlaceholder reports whether v is one of the routes' placeholders.
func (n *netPlan) isPlaceholder(v string) bool {
	for _, r := range n.routes {
		if _, ok := r.Secrets[v]; ok {
			return true
		}
	}
	return false
}

// proxyEnv turns the jail's environment env into a proxy jail's: the
// proxy variables pointing at the broker, each API's base URL at its route
// and each credential replaced by a placeholder the broker swaps back; the
// real values and upstreams go into the plan. apiKey, when not empty,
// is the Anthropic API key from --api-key-file.
func proxyEnv(env []string, p policy.Policy, apiKey string) ([]string, *netPlan, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if apiKey != "" {
		vars["ANTHROPIC_API_KEY"] = apiKey
	}
	n := &netPlan{rules: policy.ParseNetRules(p.Network.Allow)}
	for _, a := range apiRoutes {
		base := a.upstream
		if v := vars[a.baseVar]; v != "" {
			base = v
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, UsageError(fmt.Sprintf("%s=%s is not an http:// or https:// URL; the broker's API route cannot forward to it", a.baseVar, base))
		}
		rt := broker.Route{Name: a.name, Upstream: u, Secrets: map[string]string{}, Paths: a.paths}
		rep := record.APIRoute{Name: a.name, Upstream: u.Redacted(), Credentials: []string{}}
		for _, c := range a.creds {
			if v := vars[c.name]; v != "" {
				ph := placeholder(c.prefix)
				rt.Secrets[ph] = v
				vars[c.name] = ph
				rep.Credentials = append(rep.Credentials, c.name)
			}
		}
		if v := vars[a.headersVar]; a.headersVar != "" && v != "" {
			rt.Headers = parseHeaders(v)
			rep.Credentials = append(rep.Credentials, a.headersVar)
		}
		vars[a.baseVar] = BrokerURL + "/" + a.name
		n.routes, n.report = append(n.routes, rt), append(n.report, rep)
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		vars[k] = BrokerURL
	}
	for _, k := range []string{"ALL_PROXY", "all_proxy"} {
		vars[k] = "socks5h://127.0.0.1:" + strconv.Itoa(BrokerPort)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		vars[k] = "localhost,127.0.0.1,::1"
	}
	for k, v := range quietAgents {
		if _, set := vars[k]; !set {
			vars[k] = v
		}
	}
	for k, v := range vars {
		if (isAgentSecret(k) || isAgentSecretValue(k, v)) && !n.isPlaceholder(v) && !strings.HasPrefix(v, BrokerURL) {
			delete(vars, k) // the broker holds it (a route's), or nothing uses it
			if v != "" && !slices.ContainsFunc(apiRoutes, func(a apiRoute) bool { return a.headersVar == k }) {
				n.dropped = append(n.dropped, k)
			}
		}
	}
	slices.Sort(n.dropped)
	cfg := httpproxy.FromEnvironment()
	n.proxy = cfg.ProxyFunc()
	for _, s := range []string{cfg.HTTPSProxy, cfg.HTTPProxy} {
		if u, err := url.Parse(s); s != "" && err == nil {
			n.upstream = u.Redacted()
			break
		}
	}
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out, n, nil
}

// withoutAPICredentials is env without the agents' credentials (those a
// proxy jail replaces with placeholders, and every other isAgentSecret): a
// jail with no network holds none of them, since nothing in it could
// reach an API.
func withoutAPICredentials(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, v, _ := strings.Cut(kv, "=")
		return isAgentSecret(k) || isAgentSecretValue(k, v)
	})
}

// withoutRefreshTokens is env without refreshTokens.
func withoutRefreshTokens(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(refreshTokens, k)
	})
}

// noNetworkLogin is why a jail with no network gets no login: nothing in
// it could use one.
const noNetworkLogin = "not copied in: the jail has no network (network.mode none)"

// placeholder is a credential's stand-in in the jail: shaped like the
// real one, worth nothing outside this run's broker.
func placeholder(prefix string) string {
	return prefix + "placeholder-" + strings.ToLower(rand.Text())
}

// brokerSecret gives route name the operator's credential value, puts a
// placeholder with prefix in the jail's variable env instead, and names
// the credential in the record as what (the variable, or the file it came
// from).
func (j *Jail) brokerSecret(name, env, prefix, value, what string) {
	for i := range j.net.routes {
		rt := &j.net.routes[i]
		if rt.Name != name {
			continue
		}
		ph := placeholder(prefix)
		rt.Secrets[ph] = value
		j.net.report[i].Credentials = append(j.net.report[i].Credentials, what)
		j.Env = setEnv(j.Env, env, ph)
	}
}

// holds says whether route name holds a credential already.
func (j *Jail) holds(name string) bool {
	for _, rt := range j.net.routes {
		if rt.Name == name && len(rt.Secrets) > 0 {
			return true
		}
	}
	return false
}

// moveLogin keeps the operator's Claude Code login out of a proxy jail:
// its access token goes to the broker, and the jail gets a placeholder in
// CLAUDE_CODE_OAUTH_TOKEN instead of the credentials file; where the run
// has a credential in its environment, claude uses that, and the login is
// left out altogether. login has checked it first (an expired one stops
// the run).
func (j *Jail) moveLogin() {
	h := j.Plan.Claude
	if j.net == nil || h == nil {
		return
	}
	dst := filepath.Join(h.Dir, mounts.ClaudeCredentials)
	data := j.files[dst]
	if data == nil {
		return
	}
	var f struct {
		OAuth struct {
			AccessToken string `json:"accessToken"`
		} `json:"claudeAiOauth"`
	}
	json.Unmarshal(data, &f)
	j.keep(dst, nil)
	c := j.credentials
	c.Copied = false
	if other := claude.EnvLogin(j.Env); other != "" || f.OAuth.AccessToken == "" {
		c.Detail = "not copied in: the run has " + other + " (through the broker)"
		return
	}
	j.brokerSecret("anthropic", "CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-agentjail-", f.OAuth.AccessToken, "claude_login")
	c.Detail = "not copied in: agentjail's broker holds its access token (without the refresh token) and puts it in the API requests; the jail has a placeholder in CLAUDE_CODE_OAUTH_TOKEN"
}

// configKey gives the broker the API key of the operator's ~/.claude.json
// (primaryApiKey, what `claude /login` with a Console account keeps), when
// the run has no Anthropic credential otherwise: the jail never gets the
// key (ConfigForRun leaves it out), only a placeholder in
// ANTHROPIC_API_KEY. It runs before ConfigForRun and approvePlaceholder,
// which approve the placeholder's end for interactive claude.
func (j *Jail) configKey(data []byte) {
	if j.net == nil || j.holds("anthropic") {
		return
	}
	var f struct {
		Key string `json:"primaryApiKey"`
	}
	if json.Unmarshal(data, &f) == nil && f.Key != "" {
		j.brokerSecret("anthropic", "ANTHROPIC_API_KEY", "sk-ant-api03-agentjail-", f.Key, "primaryApiKey")
	}
}

// realEnv is the jail's environment with the operator's Anthropic API key
// in place of its placeholder: what the operator's approval of a key
// (~/.claude.json's customApiKeyResponses) is judged by.
func (j *Jail) realEnv() []string {
	if j.net == nil {
		return j.Env
	}
	for _, kv := range j.Env {
		if ph, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok {
			for _, rt := range j.net.routes {
				if real, ok := rt.Secrets[ph]; ok {
					return setEnv(j.Env, "ANTHROPIC_API_KEY", real)
				}
			}
		}
	}
	return j.Env
}

// approvePlaceholder turns, in the run's ~/.claude.json, the operator's
// approval of the real API key into one of the jail's placeholder, so that
// interactive claude does not ask about the key it was given; without
// such an approval nothing is added.
func (j *Jail) approvePlaceholder(config []byte) []byte {
	real, ph := claude.APIKeyEnd(j.realEnv()), claude.APIKeyEnd(j.Env)
	if j.net == nil || real == ph {
		return config
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(config, &cfg) != nil {
		return config
	}
	if _, ok := cfg["customApiKeyResponses"]; !ok {
		return config
	}
	cfg["customApiKeyResponses"], _ = json.Marshal(map[string][]string{"approved": {ph}})
	out, err := json.Marshal(cfg)
	if err != nil {
		return config
	}
	return out
}

// moveCodexLogin keeps the operator's Codex login out of a proxy jail: an
// API key of auth.json goes to the broker (the jail gets a placeholder in
// OPENAI_API_KEY, which the provider of the run's config.toml sends), a
// ChatGPT login is left out (it is used at chatgpt.com, which the API
// route does not serve); with a credential in the run's environment the
// file is left out altogether.
func (j *Jail) moveCodexLogin() {
	h := j.Plan.Codex
	if j.net == nil || h == nil {
		return
	}
	dst := filepath.Join(h.Dir, mounts.CodexAuth)
	data := j.files[dst]
	if data == nil {
		return
	}
	j.keep(dst, nil)
	var f struct {
		APIKey string `json:"OPENAI_API_KEY"`
	}
	json.Unmarshal(data, &f)
	c := j.codexCredentials
	c.Copied = false
	switch {
	case j.holds("openai"):
		c.Detail = "not copied in: the run has a credential of its own (through the broker)"
	case f.APIKey != "":
		j.brokerSecret("openai", "OPENAI_API_KEY", "sk-agentjail-", f.APIKey, "auth.json")
		c.Detail = "not copied in: agentjail's broker holds its API key and puts it in the API requests; the jail has a placeholder in OPENAI_API_KEY"
	default:
		c.Detail = "not copied in: a ChatGPT login is used at chatgpt.com, which the broker's API route does not serve; give the run OPENAI_API_KEY, or run it with --net host"
	}
}

// codexConfig is the config.toml a proxy jail's private Codex directory
// gets: a model provider at the broker's API route, sending the jail's
// OPENAI_API_KEY (a placeholder the broker swaps), chosen by default
// (Codex 0.169.0 ignores OPENAI_BASE_URL for its built-in provider and
// would go to api.openai.com, which the broker refuses), and Codex's
// other traffic off (analytics to ab.chatgpt.com; plugins from
// chatgpt.com and github.com). nil outside a proxy jail. A -c on codex's
// command line still overrides it.
func (j *Jail) codexConfig() []byte {
	if j.net == nil || j.Plan.Codex == nil {
		return nil
	}
	return []byte(`# Written by agentjail for a proxy jail (docs/network.md): the API goes
# through agentjail's broker, which adds the operator's credential.
model_provider = "agentjail"

[model_providers.agentjail]
name = "agentjail"
base_url = "` + BrokerURL + `/openai"
wire_api = "responses"
env_key = "OPENAI_API_KEY"

[analytics]
enabled = false

[features]
plugins = false
`)
}

// setEnv sets k=v in env (sorted NAME=value entries).
func setEnv(env []string, k, v string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	out = append(out, k+"="+v)
	slices.Sort(out)
	return out
}

// readAPIKey reads --api-key-file: the key, without the line's end.
func readAPIKey(name string, interrupt <-chan os.Signal) (string, error) {
	if name == "" {
		return "", nil
	}
	data, err := hostfs.ReadInput(name, 64<<10, interrupt)
	if err != nil {
		return "", UsageError(fmt.Sprintf("--api-key-file %s: %v", policy.Quote(name), err))
	}
	key := strings.TrimSpace(string(data))
	if key == "" || strings.ContainsAny(key, "\n\r\x00 ") {
		return "", UsageError(fmt.Sprintf("--api-key-file %s: holds no key, or more than one line; write the key alone", policy.Quote(name)))
	}
	return key, nil
}

// netRun is a run's network while the jail lives: the broker, which the
// exec stage's listeners start (Control), and what it has to say.
type netRun struct {
	b        *broker.Broker
	mu       sync.Mutex
	warnings []string
	say      func(line string)
}

// startNetwork makes the broker of a proxy jail, ready for the listeners
// the exec stage sends (spec.Control); nil in other modes. A refused host
// is said once, through say (one line, without its "agentjail: " and its
// end: at a raw terminal the line needs \r\n).
func (j *Jail) startNetwork(spec *supervise.Spec, say func(line string)) *netRun {
	if j.net == nil {
		return nil
	}
	nr := &netRun{say: say}
	nr.b = broker.New(broker.Config{
		Rules: j.net.rules, Routes: j.net.routes, Port: BrokerPort, Proxy: j.net.proxy,
		HostAddrs: hostAddrs(),
		// The operator's way off the kernel path (docs/network.md).
		NoKernelPath: os.Getenv("AGENTJAIL_KERNEL_PATH") == "off",
		Say: func(hostPort, why string) {
			say("network: " + why)
		},
	})
	spec.Control = nr.control
	return nr
}

// control takes the exec stage's messages: each listener, once checked,
// is served by the broker. One that fails the check is closed (the jail
// then has no way out: fail closed) and reported.
func (nr *netRun) control(m execstage.Message, files []*os.File) {
	for _, f := range files {
		defer f.Close()
	}
	if m.Kind != execstage.KindListener || len(files) != 1 {
		nr.warn(fmt.Sprintf("the exec stage sent a %q message with %d descriptors; ignored", m.Kind, len(files)))
		return
	}
	l, err := broker.Listener(files[0], BrokerPort)
	if err != nil {
		nr.warn(fmt.Sprintf("network: the broker does not serve on %s: %v; the jail has no way out there", m.Addr, err))
		return
	}
	nr.b.Serve(l)
}

// chainControl hands the exec stage's listener messages to first (the
// network's) and every other to next (the terminal's, which closes what
// it did not ask for).
func chainControl(first, next func(execstage.Message, []*os.File)) func(execstage.Message, []*os.File) {
	if first == nil {
		return next
	}
	return func(m execstage.Message, files []*os.File) {
		if m.Kind == execstage.KindListener {
			first(m, files)
			return
		}
		next(m, files)
	}
}

func (nr *netRun) warn(w string) {
	nr.say("warning: " + w)
	nr.mu.Lock()
	nr.warnings = append(nr.warnings, w)
	nr.mu.Unlock()
}

// network is the record's network object, and ends the broker (call it
// once the jail has ended).
func (j *Jail) network(nr *netRun, rec *record.Record) {
	if nr == nil {
		rec.Network = record.NewNetwork(j.Policy.NetMode(), nil)
		return
	}
	n := nr.b.Close()
	n.Allow = slices.Clone(j.Policy.Network.Allow)
	if n.Allow == nil {
		n.Allow = []string{}
	}
	n.APIRoutes = j.net.report
	if j.net.upstream != "" {
		n.UpstreamProxy = &j.net.upstream
	}
	rec.Network = n
	nr.mu.Lock()
	rec.Warnings = append(rec.Warnings, nr.warnings...)
	nr.mu.Unlock()
}

// hostAddrs are the host's own interface addresses.
func hostAddrs() []netip.Addr {
	as, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

package claude

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// MaxSettings bounds the operator's ~/.claude/settings.json agentjail
// reads.
const MaxSettings = 1 << 20

// settingsKeys are the keys of the operator's ~/.claude/settings.json a run
// gets (Claude Code 2.1.197's settings schema, 143 top-level keys; it
// passes unknown keys through and grows every release, so keys are carried
// by this list and every other is left out). Two kinds:
//
//   - the policy the operator wants in force: permissions, sandbox (but
//     the programs it names, and sandbox.network.tlsTerminate, which
//     names a CA's private key: sandboxDropped, networkDropped), the
//     switches that turn hooks, skills' shell commands, auto mode, MCP
//     servers or remote features off;
//   - preferences that run nothing and hold nothing: models, effort,
//     output style, language, display, attribution, clean-up, memory.
//
// Left out, with the reason (docs/claude.md has the table): hooks,
// statusLine, subagentStatusLine, fileSuggestion, apiKeyHelper,
// proxyAuthHelper, awsCredentialExport, awsAuthRefresh, gcpAuthRefresh,
// otelHeadersHelper, policyHelper, defaultShell and sshConfigs run
// commands of the settings' choosing, inside the jail, often before any
// model call; env and the helpers hold or make credentials (no credential
// enters the jail through the settings); enabledPlugins and the
// marketplaces bring hooks, MCP servers and commands, and fetch them;
// enableAllProjectMcpServers and enabledMcpjsonServers start a
// repository's MCP servers unasked; autoUploadSessions,
// remoteControlAtStartup, channelsEnabled and the notification switches
// send data out; teammateMode starts terminals.
var settingsKeys = []string{
	"$schema",
	// Policy.
	"permissions", "sandbox", "disableAllHooks", "disableSkillShellExecution", "allowManagedHooksOnly",
	"allowedHttpHookUrls", "httpHookAllowedEnvVars", "allowManagedPermissionRulesOnly",
	"allowManagedMcpServersOnly", "deniedMcpServers", "disabledMcpjsonServers", "disableClaudeAiConnectors",
	"disableBundledSkills", "skillOverrides", "claudeMdExcludes", "disableAutoMode", "disableRemoteControl",
	"disableWorkflows", "skipDangerousModePermissionPrompt",
	// Preferences.
	"model", "fallbackModel", "availableModels", "effortLevel", "alwaysThinkingEnabled", "outputStyle",
	"language", "theme", "editorMode", "verbose", "viewMode", "tui", "spinnerTipsEnabled", "spinnerVerbs",
	"spinnerTipsOverride", "syntaxHighlightingDisabled", "attribution", "includeCoAuthoredBy",
	"includeGitInstructions", "cleanupPeriodDays", "respectGitignore", "autoCompactEnabled",
	"todoFeatureEnabled", "promptSuggestionEnabled", "showTurnDuration", "showThinkingSummaries",
	"showMessageTimestamps", "terminalProgressBarEnabled", "prefersReducedMotion", "agent",
	"autoMemoryEnabled", "plansDirectory", "autoMemoryDirectory",
}

// sandboxDropped are the keys of sandbox left out: ripgrep names a
// command claude runs for its sandbox (ripgrep.command, its args), and
// bwrapPath and socatPath the programs of the sandbox itself (2.1.197
// honours these from managed settings only, which a release may change).
// networkDropped are those of sandbox.network: tlsTerminate names a CA's
// private key (caKeyPath) for claude's TLS-terminating proxy.
var (
	sandboxDropped = []string{"bwrapPath", "ripgrep", "socatPath"}
	networkDropped = []string{"tlsTerminate"}
)

// Settings is the operator's settings.json as a run gets it.
type Settings struct {
	// File is the settings.json the jail gets, read-only.
	File []byte
	// Dropped are the keys left out, sorted ("sandbox.network.tlsTerminate"
	// for a nested one).
	Dropped []string
}

// SettingsForRun makes, from the operator's ~/.claude/settings.json src,
// the one a run gets: the keys of settingsKeys, the rest dropped and
// listed. It fails when src is not a JSON object.
func SettingsForRun(src []byte) (Settings, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(src, &file); err != nil {
		return Settings{}, fmt.Errorf("is not a settings file agentjail reads (%v); it takes plain JSON, without comments or trailing commas", err)
	}
	out := map[string]json.RawMessage{}
	var s Settings
	for _, k := range slices.Sorted(maps.Keys(file)) {
		if !slices.Contains(settingsKeys, k) {
			s.Dropped = append(s.Dropped, k)
			continue
		}
		out[k] = file[k]
	}
	if raw, ok := out["sandbox"]; ok {
		var sandbox map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sandbox); err != nil {
			return Settings{}, fmt.Errorf("is not a settings file (sandbox: %v)", err)
		}
		for _, k := range sandboxDropped {
			if _, ok := sandbox[k]; ok {
				delete(sandbox, k)
				s.Dropped = append(s.Dropped, "sandbox."+k)
			}
		}
		if net, ok := sandbox["network"]; ok {
			var network map[string]json.RawMessage
			if err := json.Unmarshal(net, &network); err != nil {
				return Settings{}, fmt.Errorf("is not a settings file (sandbox.network: %v)", err)
			}
			for _, k := range networkDropped {
				if _, ok := network[k]; ok {
					delete(network, k)
					s.Dropped = append(s.Dropped, "sandbox.network."+k)
				}
			}
			sandbox["network"], _ = json.Marshal(network)
		}
		out["sandbox"], _ = json.Marshal(sandbox)
	}
	var err error
	s.File, err = json.MarshalIndent(out, "", "  ")
	return s, err
}

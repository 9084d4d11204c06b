package claude

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxConfig bounds the operator's ~/.claude.json agentjail reads: it grows
// with every project's history, and a few MiB is already much.
const MaxConfig = 16 << 20

// configKeys are the keys of ~/.claude.json a run gets (Claude Code
// 2.1.197's global configuration): the state that spares a run claude's
// first-start dialogs, and which account the copied login is. Everything
// else stays out: primaryApiKey, the MCP servers' env and headers (their
// tokens), customApiKeyResponses (API keys' ends), every project's prompt
// history, userID.
var configKeys = []string{
	"hasCompletedOnboarding",
	"lastOnboardingVersion",
	"theme",
	"bypassPermissionsModeAccepted", // --dangerously-skip-permissions's disclaimer
	"hasAcknowledgedCostThreshold",
	"oauthAccount", // the copied login's account: uuid, email, organisation
}

// projectKeys are the keys of each entry of projects (by directory) a run
// gets: whether the operator trusts the directory and has seen its
// onboarding. Its allowedTools, mcpServers (with their env), history and
// the rest stay out.
var projectKeys = []string{
	"hasTrustDialogAccepted",
	"hasCompletedProjectOnboarding",
	"projectOnboardingSeenCount",
	"hasClaudeMdExternalIncludesApproved",
	"hasClaudeMdExternalIncludesWarningShown",
}

// ConfigForRun makes, from the operator's ~/.claude.json src, the one a run
// gets: the keys of configKeys, and of each project's the keys of
// projectKeys (a project without one of them is left out). keyEnd, when
// given and not empty, is the end of the API key the run gets (APIKeyEnd):
// where the operator has approved that key, the approval comes along, and
// claude does not ask again; no other key's end does. It fails when src is
// not a JSON object, or a project not one either.
func ConfigForRun(src []byte, keyEnd ...string) ([]byte, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(src, &file); err != nil {
		return nil, fmt.Errorf("is not what claude writes there (%v)", err)
	}
	out := map[string]any{}
	for _, k := range configKeys {
		if v, ok := file[k]; ok {
			out[k] = v
		}
	}
	if raw, ok := file["customApiKeyResponses"]; ok && len(keyEnd) > 0 && keyEnd[0] != "" {
		var answers struct {
			Approved []string `json:"approved"`
		}
		if json.Unmarshal(raw, &answers) == nil && slices.Contains(answers.Approved, keyEnd[0]) {
			out["customApiKeyResponses"] = map[string][]string{"approved": {keyEnd[0]}}
		}
	}
	if raw, ok := file["projects"]; ok {
		var projects map[string]map[string]json.RawMessage
		if err := json.Unmarshal(raw, &projects); err != nil {
			return nil, fmt.Errorf("is not what claude writes there (projects: %v)", err)
		}
		kept := map[string]map[string]json.RawMessage{}
		for dir, p := range projects {
			for _, k := range projectKeys {
				if v, ok := p[k]; ok {
					if kept[dir] == nil {
						kept[dir] = map[string]json.RawMessage{}
					}
					kept[dir][k] = v
				}
			}
		}
		if len(kept) > 0 {
			out["projects"] = kept
		}
	}
	return json.Marshal(out)
}

// APIKeyEnd is how claude names the API key in env (ANTHROPIC_API_KEY)
// among the keys the operator approved (customApiKeyResponses): its last
// 20 characters. "" when env has none.
func APIKeyEnd(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_API_KEY="); ok && v != "" {
			return v[max(0, len(v)-20):]
		}
	}
	return ""
}

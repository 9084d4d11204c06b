package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
)

// TestClaudeNestedSessionVariables measures, jailed, why agentjail removes
// what an enclosing Claude Code session gives the commands it runs
// (policy.AlwaysUnset): the pinned claude, in --print mode and as the
// interactive CLI on the jail's terminal, started by a wrapper in the jail
// that sets the variable agentjail strips (so it reaches claude whatever
// agentjail does). With CLAUDECODE=1 both modes start, answer and write
// their transcript, exactly as without it: 2.1.197 has no nesting guard
// (anthropics/claude-code#25434 reports one since 2.1.39). With
// CLAUDE_CODE_CHILD_SESSION=1 --print is unchanged, but the interactive CLI
// answers and writes no transcript: its session could never be resumed.
// The controls: the same runs with nothing set, and with both variables
// given to agentjail instead, which strips them (transcript written).
func TestClaudeNestedSessionVariables(t *testing.T) {
	jailed(t)
	bin := testutil.RequireClaude(t)
	for _, c := range []struct {
		name       string
		inside     string   // what the wrapper exports in the jail
		outside    []string // agentjail's own environment
		transcript map[string]bool
	}{
		{"control", "", nil, map[string]bool{"print": true, "interactive": true}},
		{"CLAUDECODE=1", "CLAUDECODE=1", nil, map[string]bool{"print": true, "interactive": true}},
		{"CLAUDE_CODE_CHILD_SESSION=1", "CLAUDE_CODE_CHILD_SESSION=1", nil, map[string]bool{"print": true, "interactive": false}},
		{"stripped", "", []string{"CLAUDECODE=1", "CLAUDE_CODE_CHILD_SESSION=1"}, map[string]bool{"print": true, "interactive": true}},
	} {
		for _, mode := range []string{"print", "interactive"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				srv := fakeapi.New(t, fakeapi.Text("answer-from-stand-in-42"))
				dir, home, wrapper, results := visibleDir(t), visibleDir(t), visibleDir(t), t.TempDir()
				// The wrapper is named claude, so that agentjail still
				// takes the command for claude (its record's claude
				// object); it notes the environment claude starts with.
				export := ""
				if c.inside != "" {
					export = "export " + c.inside + "\n"
				}
				write(t, wrapper, map[string]string{"claude": "#!/bin/sh\n" + export +
					"env | grep -E '^(CLAUDECODE|CLAUDE_CODE_CHILD_SESSION)=' > " + filepath.Join(dir, ".seen") + "\n" +
					"exec " + bin + ` "$@"` + "\n"})
				os.Chmod(filepath.Join(wrapper, "claude"), 0o755)
				key := ""
				for _, e := range srv.Env() {
					if v, ok := strings.CutPrefix(e, "ANTHROPIC_API_KEY="); ok {
						key = v
					}
				}
				// What spares the interactive CLI its first-start dialogs
				// (TestInteractiveClaude).
				accepted, _ := json.Marshal(map[string]any{
					"hasCompletedOnboarding": true,
					"projects":               map[string]any{dir: map[string]any{"hasTrustDialogAccepted": true}},
					"customApiKeyResponses":  map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}},
				})
				write(t, home, map[string]string{".claude.json": string(accepted)})
				write(t, dir, map[string]string{".claude/settings.json": "{}\n"})
				rec := recordPath(t)
				env := append(append([]string{"HOME=" + home}, srv.Env()...), c.outside...)
				aj := []string{"run", "--profile", "tier1", "--user", "1000", "--write", dir, "--chdir", dir,
					"--record", rec, "--results", results, "--env", "DISABLE_AUTOUPDATER=1", "--", filepath.Join(wrapper, "claude")}
				var code int
				var shown string
				if mode == "print" {
					r := invocation{env: env, dir: dir}.run(t, append(aj, "--print", "--output-format", "json", "say hi")...)
					code, shown = r.code, r.stdout+r.stderr
				} else {
					o := atTerminalEnv(t, 40, 120, env, append([]string{agentjail}, aj...)...)
					o.waitScreen(t, "? for shortcuts")
					o.typed(t, "please answer me now")
					o.waitScreen(t, "please answer me now")
					o.typed(t, "\r") // apart: a chunk with the CR inside may be taken for a paste
					o.waitScreen(t, "answer-from-stand-in-42")
					o.typed(t, "/exit")
					o.waitScreen(t, "/exit")
					time.Sleep(300 * time.Millisecond) // the command list's completion
					o.typed(t, "\r")
					code, _ = o.wait(t)
					shown = o.screen()
				}
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("agentjail exited %d; it showed:\n%s\nthe stand-in saw:\n%s", code, shown, srv.Dump())
					}
				})
				if code != 0 || !strings.Contains(shown, "answer-from-stand-in-42") {
					t.Errorf("exit %d, the answer shown: %v", code, strings.Contains(shown, "answer-from-stand-in-42"))
				}
				seen, err := os.ReadFile(filepath.Join(dir, ".seen"))
				if want := strings.TrimSpace(c.inside); err != nil || strings.TrimSpace(string(seen)) != want {
					t.Errorf("claude started with %q (%v), want %q", seen, err, want)
				}
				r := readRecord(t, rec, code)
				var transcripts []string
				if r.Claude != nil {
					for _, p := range r.Claude.Transcripts {
						if strings.HasSuffix(p, ".jsonl") {
							transcripts = append(transcripts, p)
						}
					}
				}
				if want := c.transcript[mode]; (len(transcripts) == 1) != want || len(transcripts) > 1 {
					t.Errorf("claude wrote the transcripts %q; want one: %v", transcripts, want)
				}
			})
		}
	}
}

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/internal/testutil/fakeapi"
)

// screenCodes are the control sequences and strings a TUI draws with:
// the screen's text is what is left with each replaced by a space (ink
// separates some words with cursor moves).
var screenCodes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[78=>]`)

// waitScreen waits until the terminal's text shows s.
func (o *operator) waitScreen(t *testing.T, s string) {
	t.Helper()
	waitFor(t, func() bool {
		select {
		case <-o.exited:
			t.Fatalf("agentjail ended (exit %d) before the screen showed %q:\n%s", o.code, s, o.screen())
		default:
		}
		return strings.Contains(o.screen(), s)
	})
}

func (o *operator) screen() string { return screenCodes.ReplaceAllString(o.shown.String(), " ") }

// TestInteractiveClaude: the pinned Claude Code's TUI, jailed on a
// terminal of its own against the stand-in, as an operator who has used
// it before (onboarding done, the directory trusted, the API key
// approved, in their ~/.claude.json), in a project without a .claude
// directory: it opens ready, without a dialog; a
// prompt typed, a Bash call (allowed by its settings) run, the answer on
// the screen, Ctrl-Z and back, /exit, exit 0; it reached nothing but its
// API route (left alone, the interactive CLI also fetches the official
// plugin marketplace from downloads.claude.ai and github.com:
// launch.quietAgents). With Claude
// Code's own sandbox on, the same call writes the working directory but
// not the home.
func TestInteractiveClaude(t *testing.T) {
	jailed(t)
	bin := testutil.RequireClaude(t)
	for _, c := range []struct {
		name, settings, outside string
	}{
		{"own sandbox off", `{"permissions":{"allow":["Bash"]}}`, "wrote-outside"},
		{"own sandbox on", `{"permissions":{"allow":["Bash"]},"sandbox":{"enabled":true,"failIfUnavailable":true,"allowUnsandboxedCommands":false}}`, "refused-outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, home := visibleDir(t), visibleDir(t)
			srv := fakeapi.New(t,
				fakeapi.Tool("Bash", map[string]any{"command": "printf made-in-tui > tui.txt; (echo x > ~/outside.txt) 2>/dev/null && echo wrote-outside || echo refused-outside", "description": "write"}),
				fakeapi.Text("answer-from-stand-in-42"))
			// Only the stand-in's base URL and key, as an operator's
			// claude has: agentjail's own defaults must keep it to its API.
			key, env := "", []string{"HOME=" + home}
			for _, e := range srv.Env() {
				if v, ok := strings.CutPrefix(e, "ANTHROPIC_API_KEY="); ok {
					key = v
				}
				if strings.HasPrefix(e, "ANTHROPIC_") {
					env = append(env, e)
				}
			}
			accepted, _ := json.Marshal(map[string]any{
				"hasCompletedOnboarding": true,
				"projects":               map[string]any{dir: map[string]any{"hasTrustDialogAccepted": true}},
				"customApiKeyResponses":  map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}},
			})
			write(t, home, map[string]string{".claude.json": string(accepted)})
			// A project without .claude: agentjail covers it with an empty
			// tmpfs in which the protected settings are masks, where
			// claude reads no settings (a .claude that is a file made it
			// open on a Settings Error, ENOTDIR) and its own sandbox makes
			// the mount points it needs; nothing of it is left on the
			// host.
			rec := recordPath(t)
			o := atTerminalEnv(t, 40, 120, env,
				agentjail, "run", "--profile", "tier1", "--user", "1000", "--write", dir, "--chdir", dir, "--record", rec,
				"--", bin, "--settings", c.settings)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the screen:\n%s\nthe stand-in saw:\n%s", o.screen(), srv.Dump())
				}
			})
			// Keys typed before claude has its terminal raw may be lost.
			o.waitScreen(t, "? for shortcuts")
			for _, dialog := range []string{"Quick safety check", "trust this folder", "Do you want to use this API key", "Welcome to Claude Code", "Settings Error"} {
				if strings.Contains(o.screen(), dialog) {
					t.Errorf("claude opened with a dialog: %q", dialog)
				}
			}
			// 10 characters or more: claude asks for a title first (a side
			// request, which takes no step of the script).
			prompt := "please write the file now"
			o.typed(t, prompt)
			o.waitScreen(t, prompt)
			o.typed(t, "\r") // apart: a chunk with the CR inside may be taken for a paste
			o.waitScreen(t, "answer-from-stand-in-42")
			// Ctrl-Z: claude suspends itself, which the kernel cannot do in
			// the jail; agentjail continues it, and it takes keys again
			// (bracketed paste back on).
			o.typed(t, "\x1a")
			suspended := o.waitShown(t, "has been suspended")
			waitFor(t, func() bool { return strings.Contains(o.shown.String()[suspended:], "\x1b[?2004h") })
			o.typed(t, "/exit")
			o.waitScreen(t, "/exit")
			time.Sleep(300 * time.Millisecond) // the command list's completion
			o.typed(t, "\r")
			code, _ := o.wait(t)
			if code != 0 {
				t.Errorf("exit %d", code)
			}
			tr := srv.ToolResults()
			if len(tr) != 1 || tr[0].IsError || !strings.Contains(tr[0].Content, c.outside) {
				t.Errorf("the Bash call: %+v; want %s", tr, c.outside)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "tui.txt")); err != nil || string(b) != "made-in-tui" {
				t.Errorf("the Bash call did not write the working directory: %q %v", b, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, ".claude")); !os.IsNotExist(err) {
				t.Errorf("the run left %s/.claude (%v)", dir, err)
			}
			if len(srv.Side()) == 0 {
				t.Error("claude asked for no title: the side request path went untried")
			}
			r := readRecord(t, rec, code)
			if r.IO != "pty" || r.Terminal == nil || r.Terminal.InputBytes == 0 || !strings.Contains(r.Excerpt.Stdout.Head+r.Excerpt.Stdout.Tail, "answer-from-stand-in-42") {
				t.Errorf("record: io %q, terminal %+v", r.IO, r.Terminal)
			}
			r.Network.apiOnly(t, "anthropic")
		})
	}
}

// TestInteractiveClaudePrint: `claude --print --output-format json` at a
// terminal runs on one of its own; its result line, which the pty ends
// with \r\n, is parsed into the record as through a pipe, and --log has
// what the terminal showed.
func TestInteractiveClaudePrint(t *testing.T) {
	jailed(t)
	bin := testutil.RequireClaude(t)
	srv := fakeapi.New(t, fakeapi.Text("printed through a pty"))
	dir, home := visibleDir(t), visibleDir(t)
	rec, log := recordPath(t), filepath.Join(t.TempDir(), "run.log")
	o := atTerminalEnv(t, 24, 80, append([]string{"HOME=" + home}, srv.Env()...),
		agentjail, "run", "--user", "1000", "--write", dir, "--chdir", dir, "--record", rec, "--log", log,
		"--", bin, "--print", "--output-format", "json", "say hi")
	code, out := o.wait(t)
	r := readRecord(t, rec, code)
	if code != 0 || r.IO != "pty" || r.Claude == nil || str(r.Claude.Result) != "printed through a pty" || r.Claude.ParseError != nil {
		t.Fatalf("exit %d, io %q, claude %+v; the terminal showed %q", code, r.IO, r.Claude, out)
	}
	if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), `"result":"printed through a pty"`) || !strings.Contains(string(b), "}\r\n") {
		t.Errorf("--log: %q, %v", b, err)
	}
}

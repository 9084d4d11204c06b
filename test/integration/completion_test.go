package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompletionScripts: `agentjail completion bash|zsh|fish` prints a
// script each shell reads without a syntax error, and that, loaded in the
// real shell, completes `agentjail run --profile ` with the built-in
// profiles (bash with the bash-completion package, as its users have it;
// fish through `complete -C`; zsh by calling the completion function with
// its completion builtins stood in for). The shells are in the Makefile's
// TEST_PKGS.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	profiles := []string{"sealed", "tier1", "tier2", "tier3"}
	dir := t.TempDir()
	// The scripts run `agentjail` from the PATH: the binary under test.
	path := "PATH=" + filepath.Dir(agentjail) + ":/usr/local/bin:/usr/bin:/bin"
	shell := func(t *testing.T, argv ...string) string {
		t.Helper()
		if _, err := exec.LookPath(argv[0]); err != nil {
			t.Skipf("%s is not installed (make deps installs it): %v", argv[0], err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{path, "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "LANG=C.UTF-8"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	lines := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				tok, _, _ := strings.Cut(l, "\t")
				out = append(out, tok)
			}
		}
		return out
	}
	for _, c := range []struct {
		shell string
		check []string // the syntax check, given the script's path
		// complete prints the completions of `agentjail run --profile CUR`.
		complete func(t *testing.T, script, cur string) []string
	}{
		{"bash", []string{"bash", "-n"}, func(t *testing.T, script, cur string) []string {
			const bashCompletion = "/usr/share/bash-completion/bash_completion"
			if _, err := os.Stat(bashCompletion); err != nil {
				t.Skipf("the bash-completion package is not installed (make deps installs it): %v", err)
			}
			return lines(shell(t, "bash", "-c", `source `+bashCompletion+` && source "$1" &&
				COMP_WORDS=(agentjail run --profile "$2") COMP_CWORD=3 COMP_LINE="agentjail run --profile $2" && COMP_POINT=${#COMP_LINE} &&
				__agentjail_bash_autocomplete && printf '%s\n' "${COMPREPLY[@]}"`, "bash", script, cur))
		}},
		{"zsh", []string{"zsh", "-n"}, func(t *testing.T, script, cur string) []string {
			// _describe NAME ARRAY offers ARRAY's "token:description"
			// entries; _files is the fallback to file names.
			got := lines(shell(t, "zsh", "-f", "-c", `compdef() { :; }; _describe() { print -rl -- "${(@P)2}"; }; _files() { print FILES; }
				source "$1"; words=(agentjail run --profile "$2"); _agentjail`, "zsh", script, cur))
			for i, l := range got {
				got[i], _, _ = strings.Cut(l, ":")
			}
			// zsh filters by the word typed itself.
			return slices.DeleteFunc(got, func(s string) bool { return !strings.HasPrefix(s, cur) })
		}},
		{"fish", []string{"fish", "--no-execute"}, func(t *testing.T, script, cur string) []string {
			return lines(shell(t, "fish", "--no-config", "-c", `source $argv[1]; complete -C "agentjail run --profile $argv[2]"`, script, cur))
		}},
	} {
		t.Run(c.shell, func(t *testing.T) {
			t.Parallel()
			r := aj(t, "completion", c.shell)
			wantCode(t, r, 0)
			script := filepath.Join(dir, "agentjail."+c.shell)
			if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			shell(t, append(c.check, script)...)
			if got := c.complete(t, script, ""); !slices.Equal(got, profiles) {
				t.Errorf("agentjail run --profile <TAB>: %q, want %q", got, profiles)
			}
			if got := c.complete(t, script, "tier"); !slices.Equal(got, profiles[1:]) {
				t.Errorf("agentjail run --profile tier<TAB>: %q, want %q", got, profiles[1:])
			}
		})
	}
}

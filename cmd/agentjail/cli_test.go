package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/policy"
)

// TestHelpSaysOneDefault: a duration flag left out keeps the profile's
// value, and its help says so once, not also "(default: 0s)".
func TestHelpSaysOneDefault(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"run", "render"} {
		out, _, code := agentjailRun(t, sub, "--help")
		if code != 0 || strings.Contains(out, "0s)") || strings.Count(out, "(default: the profile's)") != 3 {
			t.Errorf("%s --help: exit %d\n%s", sub, code, out)
		}
	}
}

// TestUsageHintsNameTheCommand: a mistake's hint names the command as it
// is typed: `agentjail --help`, `agentjail profiles show --help`.
func TestUsageHintsNameTheCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"--bogus"}, "(see `agentjail --help`)"},
		{[]string{"profiles", "show", "--bogus", "tier1"}, "(see `agentjail profiles show --help`)"},
		{[]string{"ps", "--bogus"}, "(see `agentjail ps --help`)"},
		{[]string{"seccomp", "export", "--bogus"}, "(see `agentjail seccomp export --help`)"},
		{[]string{"stop", "a", "b"}, "`agentjail stop` stops one run, and got 2 (a, b): run it once for each"},
	} {
		_, errOut, code := agentjailRun(t, c.args...)
		if code != 125 || !strings.Contains(errOut, c.hint) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want one line with %s", c.args, code, errOut, c.hint)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, errOut, code := agentjailRun(t, "--version")
	if want := "agentjail dev (" + runtime.Version() + ", linux/" + runtime.GOARCH + ")\n"; code != 0 || out != want || errOut != "" {
		t.Errorf("--version: exit %d, stdout %q, want %q; stderr %q", code, out, want, errOut)
	}
}

// TestJSONOutputs: what a machine reads has --json: profiles (a line per
// profile), profiles show (valid against agentjail schema, and read back
// as a profile), version.
func TestJSONOutputs(t *testing.T) {
	t.Parallel()
	out, _, code := agentjailRun(t, "profiles", "--json")
	var names []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var p struct{ Name, Description string }
		if err := dec.Decode(&p); err != nil || p.Description == "" {
			t.Fatalf("profiles --json: %v %+v\n%s", err, p, out)
		}
		names = append(names, p.Name)
	}
	if code != 0 || !slices.Equal(names, []string{"sealed", "tier1", "tier2", "tier3"}) {
		t.Errorf("profiles --json: exit %d, names %v", code, names)
	}

	schemaOut, _, _ := agentjailRun(t, "schema")
	schema := testutil.CompileSchema(t, []byte(schemaOut))
	for _, name := range names {
		out, errOut, code := agentjailRun(t, "profiles", "show", "--json", name)
		var doc any
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
			t.Fatalf("profiles show --json %s: exit %d, %v\n%s", name, code, err, errOut)
		}
		if err := testutil.Validate(schema, doc); err != nil {
			t.Errorf("profiles show --json %s does not match the schema: %v", name, err)
		}
		// JSON is YAML: the output is a profile that decodes to the same.
		p, err := policy.Decode("show.json", []byte(out))
		want, _ := launch.Loader(nil).Load(name)
		if err != nil || p.Limits.Rlimits["nofile"] != want.Limits.Rlimits["nofile"] || p.Filesystem.Tmpfs["/tmp"] != want.Filesystem.Tmpfs["/tmp"] ||
			!slices.Equal(p.Environment.Allow, want.Environment.Allow) {
			t.Errorf("profiles show --json %s does not read back: %v", name, err)
		}
	}
	// A profile a run would refuse is refused, as the run refuses it:
	// what show prints is a profile a run takes.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("extends: tier1\nfilesystem:\n  protect_depth: 99\n"), 0o644)
	for _, json := range []bool{false, true} {
		args := []string{"profiles", "show", bad}
		if json {
			args = []string{"profiles", "show", "--json", bad}
		}
		out, errOut, code := agentjailRun(t, args...)
		if code != 125 || out != "" || !strings.Contains(errOut, bad+":3:3: filesystem.protect_depth: must be between 0 and 16") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	out, _, _ = agentjailRun(t, "profiles", "show", "tier1")
	if !strings.Contains(out, "nofile: 65536\n") || !strings.Contains(out, "core: 0\n") {
		t.Errorf("profiles show writes the nofile count as a size:\n%s", out)
	}

	out, _, code = agentjailRun(t, "version", "--json")
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version != "dev" || v.Go != runtime.Version() || v.OS != "linux" {
		t.Errorf("version --json: exit %d, %v\n%s", code, err, out)
	}
}

// TestCompletionAnswers: what the completion scripts ask agentjail
// (urfave/cli's --generate-shell-completion) and what it answers: the
// built-in profiles after --profile and for profiles show, flags after
// a "-", nothing where the shell completes a command or a path.
func TestCompletionAnswers(t *testing.T) {
	t.Parallel()
	profiles := []string{"sealed", "tier1", "tier2", "tier3"}
	for _, c := range []struct {
		args []string
		want []string // the tokens, before any ":description"
	}{
		{[]string{"run", "--profile"}, profiles},
		{[]string{"render", "--write", "/w", "--profile"}, profiles},
		{[]string{"doctor", "--profile"}, profiles},
		{[]string{"seccomp", "export", "--profile"}, profiles},
		{[]string{"profiles", "show"}, profiles},
		{[]string{"run", "--qu"}, []string{"--quiet"}},
		{[]string{"run"}, nil},
		{[]string{"run", "--profile", "tier1", "--", "ls"}, nil},
		{[]string{"profiles"}, []string{"show"}},
		{[]string{"completion"}, []string{"bash", "zsh", "fish"}},
	} {
		out, errOut, code := agentjailRun(t, append(c.args, "--generate-shell-completion")...)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if tok, _, _ := strings.Cut(l, ":"); tok != "" {
				got = append(got, tok)
			}
		}
		if code != 0 || !slices.Equal(got, c.want) {
			t.Errorf("%q: exit %d, %q, want %q; stderr %q", c.args, code, got, c.want, errOut)
		}
	}
	// A shell without a script is named, with those there are.
	out, errOut, code := agentjailRun(t, "completion", "tcsh")
	if code != 125 || out != "" || errOut != "agentjail: no completion script for \"tcsh\": give bash, zsh or fish\n" {
		t.Errorf("completion tcsh: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestEmptyFlagValue: a flag given an empty value is refused, not taken
// for no flag (`--record ""` wrote no record, and said nothing).
func TestEmptyFlagValue(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--record", "--log", "--user", "--chdir"} {
		_, errOut, code := agentjailRun(t, "run", flag, "", "--", "true")
		if code != 125 || !strings.Contains(errOut, flag+" was given an empty value: give one, or leave the flag out") {
			t.Errorf("%s \"\": exit %d, stderr %q", flag, code, errOut)
		}
	}
}

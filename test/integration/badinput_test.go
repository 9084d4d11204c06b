package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
)

// TestBadInput: every mistake exits 125 with one clear message on stderr
// naming the file and line (or the flag) and the fix; stdout stays empty,
// nothing panics, and the jailed command never runs.
func TestBadInput(t *testing.T) {
	testutil.RequireBwrap(t)
	t.Parallel()
	dir := visibleDirOrTemp(t)
	files := map[string]string{
		"unknown-key.yaml":  "extends: tier1\nfilesystem:\n  writable: [/srv]\n",
		"wrong-type.yaml":   "extends: tier1\nlimits:\n  wall: [10m]\n",
		"wrong-bool.yaml":   "extends: tier1\nnamespaces:\n  net: \"yes\"\n",
		"relative.yaml":     "extends: tier1\nfilesystem:\n  write:\n    - /ok\n    - relative/dir\n",
		"missing-root.yaml": "extends: tier1\nfilesystem:\n  write:\n    - /nonexistent/agentjail/root\n",
		"two-docs.yaml":     "extends: tier1\n---\nextends: tier2\n",
		"dup.yaml":          "extends: tier1\nlimits:\n  wall: 1m\n  wall: 2m\n",
		"neg-idle.yaml":     "extends: tier1\nlimits:\n  idle: -5\n",
		"bad-grace.yaml":    "extends: tier1\nlimits:\n  grace: 10 minutes\n",
		"old-bwrap":         "#!/bin/sh\necho bubblewrap 0.6.1\n",
	}
	write(t, dir, files)
	os.Chmod(filepath.Join(dir, "old-bwrap"), 0o755)
	f := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown key", nil, []string{"--profile", f("unknown-key.yaml")}, []string{f("unknown-key.yaml") + `:3:3: filesystem.writable: unknown key; filesystem takes base, proc, read, write,`, "agentjail schema"}},
		{"wrong type", nil, []string{"--profile", f("wrong-type.yaml")}, []string{f("wrong-type.yaml") + ":3:9: limits.wall: expected a duration (90s, 10m or a number of seconds), got a list; e.g. `wall: 10m`"}},
		{"wrong type bool", nil, []string{"--profile", f("wrong-bool.yaml")}, []string{f("wrong-bool.yaml") + ":3:8: namespaces.net: expected true or false, got a string; e.g. `net: true`"}},
		{"relative path", nil, []string{"--profile", f("relative.yaml")}, []string{f("relative.yaml") + `:5:7: filesystem.write[1]: "relative/dir" must be absolute (start with /, ~/ or ${PWD}/)`}},
		{"nonexistent root in a profile", nil, []string{"--profile", f("missing-root.yaml")}, []string{f("missing-root.yaml") + ":4:7: filesystem.write[0]: writable root /nonexistent/agentjail/root does not exist; create it first"}},
		{"nonexistent root flag", nil, []string{"--write", "/nonexistent/agentjail/flag"}, []string{"--write: filesystem.write[0]: writable root /nonexistent/agentjail/flag does not exist"}},
		{"second document", nil, []string{"--profile", f("two-docs.yaml")}, []string{f("two-docs.yaml") + ":2:1: cannot decode policy: a profile is one YAML document"}},
		{"duplicate key", nil, []string{"--profile", f("dup.yaml")}, []string{f("dup.yaml") + `:4:3: cannot decode policy: mapping key "wall" already defined`}},
		{"unknown profile", nil, []string{"--profile", "tier9"}, []string{`unknown profile "tier9": built-in profiles are sealed, tier1, tier2, tier3`}},
		{"missing profile file", nil, []string{"--profile", f("nope.yaml")}, []string{f("nope.yaml") + ": no such file"}},
		{"bwrap missing", []string{"AGENTJAIL_BWRAP=/nonexistent/bwrap"}, nil, []string{"bubblewrap (bwrap) not found", "apt-get install bubblewrap"}},
		{"bwrap too old", []string{"AGENTJAIL_BWRAP=" + f("old-bwrap")}, nil, []string{"bubblewrap is too old: " + f("old-bwrap") + " is 0.6.1, agentjail needs >= 0.8.0", "apt-get install bubblewrap"}},
		{"bad duration", nil, []string{"--timeout", "soon"}, []string{`invalid value "soon" for flag --timeout: invalid duration "soon"`}},
		{"negative duration", nil, []string{"--idle-timeout", "-5"}, []string{`invalid value "-5" for flag --idle-timeout: duration "-5" is negative`}},
		{"negative grace", nil, []string{"--grace", "-1s"}, []string{`invalid value "-1s" for flag --grace: duration "-1s" is negative (use 0 for none)`}},
		{"empty timeout", nil, []string{"--timeout="}, []string{`invalid value "" for flag --timeout: empty duration`}},
		{"negative duration in a profile", nil, []string{"--profile", f("neg-idle.yaml")}, []string{f("neg-idle.yaml") + `:3:9: limits.idle: duration "-5" is negative`}},
		{"bad duration in a profile", nil, []string{"--profile", f("bad-grace.yaml")}, []string{f("bad-grace.yaml") + `:3:10: limits.grace: invalid duration "10 minutes"`}},
		{"record in a missing directory", nil, []string{"--record", "/nonexistent/aj-dir/r.json"}, []string{"--record /nonexistent/aj-dir/r.json: cannot create a file in /nonexistent/aj-dir: no such file or directory"}},
		{"log in a missing directory", nil, []string{"--log", "/nonexistent/agentjail/log"}, []string{"--log: open /nonexistent/agentjail/log: no such file or directory"}},
		{"--env of an unset variable", nil, []string{"--env", "AGENTJAIL_TEST_UNSET"}, []string{`--env "AGENTJAIL_TEST_UNSET": AGENTJAIL_TEST_UNSET is not set in agentjail's environment; export it, or write AGENTJAIL_TEST_UNSET=VALUE`}},
		{"--env of a variable always removed", nil, []string{"--env", "CLAUDECODE=1"}, []string{"--env: environment.set[CLAUDECODE]: agentjail always removes CLAUDECODE from the jail's environment"}},
		{"results not a directory", nil, []string{"--results", "/etc/passwd"}, []string{"--results /etc/passwd: open /etc/passwd: not a directory; choose a directory agentjail can create or write"}},
		{"start directory the run user cannot enter", nil, []string{"--chdir", "/root"}, []string{"start directory /root: the run user ", "may not enter it; pass --chdir with a directory that user may enter, or choose the run user with --user"}},
		{"unknown flag", nil, []string{"--bogus"}, []string{"flag provided but not defined: -bogus", "agentjail run --help"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(dir, "ran-"+strings.ReplaceAll(c.name, " ", "-"))
			r := invocation{env: c.env}.run(t, append(append([]string{"run"}, c.args...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout is not empty:\n%s", r.stdout)
			}
			if n := strings.Count(r.stderr, "agentjail: "); n != 1 {
				t.Errorf("%d messages on stderr, want one:\n%s", n, r.stderr)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}
}

func TestNoCommand(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"run", "render"} {
		r := aj(t, sub)
		wantCode(t, r, 125)
		if !strings.Contains(r.stderr, "no command to run: write `agentjail "+sub+" [flags] -- CMD [ARG...]`") || r.stdout != "" {
			t.Errorf("%s without a command: stdout %q stderr %q", sub, r.stdout, r.stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{nil, "agentjail: no command: write `agentjail run -- CMD [ARG...]`, or see `agentjail --help`"},
		{[]string{"schema", "extra"}, "agentjail schema takes no arguments, got [\"extra\"] (see `agentjail schema --help`)"},
		{[]string{"profiles", "tier1"}, "agentjail profiles takes no arguments, got [\"tier1\"]"},
	} {
		r := aj(t, c.args...)
		wantCode(t, r, 125)
		if !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("agentjail %q: stdout %q stderr %q", c.args, r.stdout, r.stderr)
		}
	}
}

// visibleDirOrTemp is visibleDir as root and a temporary directory
// otherwise (the bad-input tests need no root).
func visibleDirOrTemp(t *testing.T) string {
	if os.Getuid() == 0 {
		return visibleDir(t)
	}
	return t.TempDir()
}

// TestBadFlagStillWritesRecord: a flag urfave/cli cannot parse is reported
// before the run starts, yet --record, wherever it stands, gets its
// setup_failed record naming the mistake.
func TestBadFlagStillWritesRecord(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args func(rp string) []string
		want string
	}{
		{"bad duration after --record", func(rp string) []string { return []string{"--record", rp, "--timeout", "soon"} }, `invalid value "soon" for flag --timeout`},
		{"--record= after a bad duration", func(rp string) []string { return []string{"--timeout=soon", "--profile", "tier2", "--record=" + rp} }, `invalid value "soon" for flag --timeout`},
		{"unknown flag", func(rp string) []string { return []string{"--bogus", "--record", rp} }, "flag provided but not defined: -bogus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			marker := filepath.Join(t.TempDir(), "ran")
			r := aj(t, append(append([]string{"run"}, c.args(rp)...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			if n := strings.Count(r.stderr, "agentjail: "); n != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr, want one message with %q:\n%s", c.want, r.stderr)
			}
			rec := readRecord(t, rp, 125)
			if rec.Reason != "setup_failed" || !strings.Contains(rec.Error, c.want) || !slices.Equal(rec.Argv, []string{"touch", marker}) || rec.User != nil {
				t.Errorf("record: reason %s, error %q, argv %q, user %v", rec.Reason, rec.Error, rec.Argv, rec.User)
			}
			if want := map[bool]string{true: "tier2", false: "tier1"}[strings.Contains(c.name, "--record=")]; rec.Profile != want {
				t.Errorf("record profile %q, want %q", rec.Profile, want)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}
}

// TestInitEnvironmentErrors: the environment twins of init's flags are
// checked like the flags, in words an operator reads (no Go type names,
// the flag as typed, the fix).
func TestInitEnvironmentErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"AGENTJAIL_INIT_GRACE=abc", `could not parse "abc" as a duration from environment variable "AGENTJAIL_INIT_GRACE" for flag --grace: invalid duration "abc" (write e.g. 90s`},
		{"AGENTJAIL_INIT_VERBOSE=maybe", `could not parse "maybe" as true or false from environment variable "AGENTJAIL_INIT_VERBOSE" for flag --verbose: write true or false (or 1 or 0)`},
	} {
		r := invocation{env: []string{c.env}}.run(t, "init", "--", "true")
		wantCode(t, r, 125)
		if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "main.") {
			t.Errorf("%s: stderr %q\nwant %q", c.env, r.stderr, c.want)
		}
	}
}

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
		"unknown-key.yaml":   "extends: tier1\nfilesystem:\n  writable: [/srv]\n",
		"wrong-type.yaml":    "extends: tier1\nlimits:\n  wall: [10m]\n",
		"wrong-bool.yaml":    "extends: tier1\nseccomp:\n  default: \"yes\"\n",
		"namespaces.yaml":    "extends: tier1\nnamespaces:\n  net: true\n",
		"bad-allow.yaml":     "extends: tier1\nnetwork:\n  allow:\n    - api.example.com\n    - \"api.example.com:99999\"\n",
		"allow-star.yaml":    "extends: tier1\nnetwork:\n  allow:\n    - \"*.\"\n",
		"allow-empty.yaml":   "extends: tier1\nnetwork:\n  allow:\n    - api.example.com\n    - \"\"\n",
		"allow-url.yaml":     "extends: tier1\nnetwork:\n  allow: [\"https://api.example.com/v1\"]\n",
		"relative.yaml":      "extends: tier1\nfilesystem:\n  write:\n    - /ok\n    - relative/dir\n",
		"missing-root.yaml":  "extends: tier1\nfilesystem:\n  write:\n    - /nonexistent/agentjail/root\n",
		"two-docs.yaml":      "extends: tier1\n---\nextends: tier2\n",
		"dup.yaml":           "extends: tier1\nlimits:\n  wall: 1m\n  wall: 2m\n",
		"neg-idle.yaml":      "extends: tier1\nlimits:\n  idle: -5\n",
		"bad-grace.yaml":     "extends: tier1\nlimits:\n  grace: 10 minutes\n",
		"old-bwrap":          "#!/bin/sh\necho bubblewrap 0.6.1\n",
		"braces.yaml":        "{}\n",
		"description.yaml":   "description: x\n",
		"no-tmp.yaml":        "limits:\n  pids: 64\n  memory: 1GiB\n",
		"tmpfs-missing.yaml": "extends: tier1\nfilesystem:\n  tmpfs:\n    /nonexistent/agentjail/cache: {size: 64MiB}\n",
		"flow-pwd.yaml":      "extends: tier1\nfilesystem:\n  write: [${PWD}/out]\n",
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
		{"wrong type bool", nil, []string{"--profile", f("wrong-bool.yaml")}, []string{f("wrong-bool.yaml") + ":3:12: seccomp.default: expected true or false, got a string; e.g. `default: true`"}},
		{"retired namespaces.net", nil, []string{"--profile", f("namespaces.yaml")}, []string{f("namespaces.yaml") + ":2:1: namespaces: removed: network.mode replaces namespaces.net: write `network: {mode: none}`"}},
		{"bad allow entry in a profile", nil, []string{"--profile", f("bad-allow.yaml")}, []string{f("bad-allow.yaml") + `:5:7: network.allow[1]: "api.example.com:99999" is not HOST[:PORT]: port "99999" is not a number from 1 to 65535`}},
		{"*. in a profile", nil, []string{"--profile", f("allow-star.yaml")}, []string{f("allow-star.yaml") + `:4:7: network.allow[0]: "*." is not HOST[:PORT]: *. with no domain after it, as in *.example.com`}},
		{"empty allow entry in a profile", nil, []string{"--profile", f("allow-empty.yaml")}, []string{f("allow-empty.yaml") + `:5:7: network.allow[1]: "" is not HOST[:PORT]: an empty entry`}},
		{"URL allow entry in a profile", nil, []string{"--profile", f("allow-url.yaml")}, []string{f("allow-url.yaml") + `:3:11: network.allow[0]: "https://api.example.com/v1" is not HOST[:PORT]: a URL; write its host alone, api.example.com`}},
		{"--allow-net with a bad port", nil, []string{"--allow-net", ":99999"}, []string{`--allow-net: network.allow[0]: ":99999" is not HOST[:PORT]`}},
		{"--allow-net *.", nil, []string{"--allow-net", "*."}, []string{`--allow-net: network.allow[0]: "*." is not HOST[:PORT]: *. with no domain after it, as in *.example.com`}},
		{"--allow-net empty", nil, []string{"--allow-net", ""}, []string{`--allow-net: network.allow[0]: "" is not HOST[:PORT]: an empty entry`}},
		{"--allow-net of a URL", nil, []string{"--allow-net", "https://api.example.com/v1"}, []string{`--allow-net: network.allow[0]: "https://api.example.com/v1" is not HOST[:PORT]: a URL; write its host alone, api.example.com`}},
		{"--net of an unknown mode", nil, []string{"--net", "filtered"}, []string{`--net: network.mode: "filtered"`, "host, none, proxy"}},
		{"--allow-net with --net host", nil, []string{"--net", "host", "--allow-net", "api.example.com"}, []string{"network.allow[0]: is used only with network.mode: proxy, and the mode is host"}},
		{"relative path", nil, []string{"--profile", f("relative.yaml")}, []string{f("relative.yaml") + `:5:7: filesystem.write[1]: "relative/dir" must be absolute (start with /, ~/ or ${PWD}/)`}},
		{"nonexistent root in a profile", nil, []string{"--profile", f("missing-root.yaml")}, []string{f("missing-root.yaml") + ":4:7: filesystem.write[0]: writable root /nonexistent/agentjail/root does not exist; create it first"}},
		{"nonexistent root flag", nil, []string{"--write", "/nonexistent/agentjail/flag"}, []string{"--write: filesystem.write[0]: writable root /nonexistent/agentjail/flag does not exist"}},
		{"second document", nil, []string{"--profile", f("two-docs.yaml")}, []string{f("two-docs.yaml") + ":2:1: cannot decode policy: a profile is one YAML document"}},
		{"duplicate key", nil, []string{"--profile", f("dup.yaml")}, []string{f("dup.yaml") + `:4:3: cannot decode policy: mapping key "wall" already defined`}},
		{"profile of {}", nil, []string{"--profile", f("braces.yaml")}, []string{f("braces.yaml") + ":1:1: extends: none, and the profile lacks limits.pids, limits.memory, a sized filesystem.tmpfs /tmp, without which its jail has no cap; add `extends: tier1` (or another profile), or set them"}},
		{"profile of a description", nil, []string{"--profile", f("description.yaml")}, []string{f("description.yaml") + ":1:1: extends: none, and the profile lacks limits.pids, limits.memory, a sized filesystem.tmpfs /tmp"}},
		{"profile without /tmp", nil, []string{"--profile", f("no-tmp.yaml")}, []string{f("no-tmp.yaml") + ":1:1: extends: none, and the profile lacks a sized filesystem.tmpfs /tmp, without"}},
		{"tmpfs at a missing path", nil, []string{"--profile", f("tmpfs-missing.yaml")}, []string{f("tmpfs-missing.yaml") + ":4:5: filesystem.tmpfs[/nonexistent/agentjail/cache]: tmpfs mount point /nonexistent/agentjail/cache does not exist, and bubblewrap cannot make it in the read-only /; create it first (mkdir -p /nonexistent/agentjail/cache)"}},
		{"unquoted ${PWD} in a flow list", nil, []string{"--profile", f("flow-pwd.yaml")}, []string{f("flow-pwd.yaml") + `:3:12: cannot decode policy: ',' or ']' must be specified (inside [ ] or { } YAML reads the { of ${...} as a mapping: quote the value, "${PWD}/out")`}},
		{"unknown profile", nil, []string{"--profile", "tier9"}, []string{`unknown profile "tier9": built-in profiles are sealed, tier1, tier2, tier3`}},
		{"missing profile file", nil, []string{"--profile", f("nope.yaml")}, []string{f("nope.yaml") + ": no such file"}},
		{"bwrap missing", []string{"AGENTJAIL_BWRAP=/nonexistent/bwrap"}, nil, []string{"bubblewrap (bwrap) not found", "apt-get install bubblewrap"}},
		{"bwrap too old", []string{"AGENTJAIL_BWRAP=" + f("old-bwrap")}, nil, []string{"bubblewrap is too old: " + f("old-bwrap") + " is 0.6.1, agentjail needs >= 0.8.0", "apt-get install bubblewrap"}},
		{"bad duration", nil, []string{"--timeout", "soon"}, []string{`invalid value "soon" for flag --timeout: invalid duration "soon"`}},
		{"negative duration", nil, []string{"--idle-timeout", "-5"}, []string{`invalid value "-5" for flag --idle-timeout: duration "-5" is negative`}},
		{"negative grace", nil, []string{"--grace", "-1s"}, []string{`invalid value "-1s" for flag --grace: duration "-1s" is negative: give 0 or more (0 turns a limit off; a grace of 0 kills at once)`}},
		{"empty timeout", nil, []string{"--timeout="}, []string{`invalid value "" for flag --timeout: empty duration`}},
		{"negative duration in a profile", nil, []string{"--profile", f("neg-idle.yaml")}, []string{f("neg-idle.yaml") + `:3:9: limits.idle: duration "-5" is negative`}},
		{"bad duration in a profile", nil, []string{"--profile", f("bad-grace.yaml")}, []string{f("bad-grace.yaml") + `:3:10: limits.grace: invalid duration "10 minutes"`}},
		{"record in a missing directory", nil, []string{"--record", "/nonexistent/aj-dir/r.json"}, []string{"--record /nonexistent/aj-dir/r.json: cannot create a file in /nonexistent/aj-dir: no such file or directory"}},
		{"log in a missing directory", nil, []string{"--log", "/nonexistent/agentjail/log"}, []string{"--log: open /nonexistent/agentjail/log: no such file or directory"}},
		{"--env of an unset variable", nil, []string{"--env", "AGENTJAIL_TEST_UNSET"}, []string{`--env "AGENTJAIL_TEST_UNSET": AGENTJAIL_TEST_UNSET is not set in agentjail's environment; export it, or write AGENTJAIL_TEST_UNSET=VALUE`}},
		{"--env of a variable always removed", nil, []string{"--env", "CLAUDECODE=1"}, []string{"--env: environment.set[CLAUDECODE]: agentjail always removes CLAUDECODE from the jail's environment"}},
		{"results not a directory", nil, []string{"--results", "/etc/passwd"}, []string{"--results /etc/passwd: open /etc/passwd: not a directory; choose a directory agentjail can create or write"}},
		{"start directory the run user cannot enter", nil, []string{"--chdir", "/root"}, []string{"start directory /root: the run user ", "may not enter it; pass --chdir with a directory that user may enter, or choose the run user with --user"}},
		{"unknown flag", nil, []string{"--bogus"}, []string{"flag provided but not defined: --bogus", "agentjail run --help"}},
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

// TestMissingStartDirectorySaidAlone: a --chdir that does not exist is the
// one mistake said, not preceded by what the run user it leaves (nobody,
// the owner of no directory) cannot write.
func TestMissingStartDirectorySaidAlone(t *testing.T) {
	t.Parallel()
	p := visibleDirOrTemp(t)
	r := aj(t, "run", "--write", p, "--chdir", p+"/missing", "--", "true")
	wantCode(t, r, 125)
	if want := "agentjail: start directory " + p + "/missing does not exist or is not a directory; pass --chdir with an existing directory\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
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
		{"unknown flag", func(rp string) []string { return []string{"--bogus", "--record", rp} }, "flag provided but not defined: --bogus"},
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

// TestHostileInputFiles (issue 14, item 4): an input file that is empty,
// endless, blocking, too large, too deep, not a file at all, or named with
// a newline ends in exit 125 before anything runs, with one line on stderr
// that names it, and with agentjail's memory bounded. Before, an empty
// profile gave a jail with no protection, /dev/zero was read for ever,
// 40 KB of [ took gigabytes and a file was taken as a writable root.
// The minute's deadline of each run only detects a hang.
func TestHostileInputFiles(t *testing.T) {
	testutil.RequireBwrap(t)
	t.Parallel()
	dir := visibleDirOrTemp(t)
	var aliases strings.Builder
	aliases.WriteString("extends: tier1\nx0: &a0 {k: v}\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&aliases, "x%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	var longKeys strings.Builder
	for i := range 10 {
		fmt.Fprintf(&longKeys, "%s%s:\n", strings.Repeat(" ", i), strings.Repeat("k", 4000))
	}
	longKeys.WriteString(strings.Repeat(" ", 10) + "- [" + strings.Repeat("x,", 40_000) + "x]\n")
	write(t, dir, map[string]string{
		"empty.yaml":       "",
		"comments.yaml":    "# extends: tier1, one day\n",
		"deep.yaml":        strings.Repeat("[", 40_000),
		"aliases.yaml":     aliases.String(),
		"long-keys.yaml":   longKeys.String(),
		"extends-dev.yaml": "extends: /dev/zero\n",
		"seccomp-dev.yaml": "extends: tier1\nseccomp:\n  files: [/dev/urandom]\n",
		"a\nb.yaml":        "",
	})
	f := func(name string) string { return filepath.Join(dir, name) }
	huge := f("huge.yaml") // 100 MB, sparse
	if err := os.WriteFile(huge, nil, 0o644); err != nil || os.Truncate(huge, 100<<20) != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", f("socket.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() }) // after the parallel subtests
	// endless is a pipe whose writer never stops: `--profile <(yes)`.
	endless := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			line := []byte(strings.Repeat("# more\n", 1000))
			for {
				if _, err := w.Write(line); err != nil {
					w.Close()
					return
				}
			}
		}()
		t.Cleanup(func() { r.Close() })
		return r
	}
	for _, c := range []struct {
		name string
		args []string
		pipe bool // fd 3 is endless
		want string
	}{
		{"empty profile", []string{"--profile", f("empty.yaml")}, false, f("empty.yaml") + ": cannot decode policy: the profile is empty; a profile is a mapping of keys, at least `extends: tier1`"},
		{"profile of comments only", []string{"--profile", f("comments.yaml")}, false, f("comments.yaml") + ": cannot decode policy: the profile is empty"},
		{"/dev/zero as profile", []string{"--profile", "/dev/zero"}, false, "/dev/zero: cannot read profile: a device; give a regular file, or a pipe such as <(command)"},
		{"/dev/urandom as profile", []string{"--profile", "/dev/urandom"}, false, "/dev/urandom: cannot read profile: a device;"},
		{"/dev/zero as --seccomp", []string{"--seccomp", "/dev/zero"}, false, "--seccomp: seccomp.files[0]: cannot read seccomp profile /dev/zero: a device; give a regular file, or a pipe such as <(command)"},
		{"/dev/urandom in seccomp.files", []string{"--profile", f("seccomp-dev.yaml")}, false, f("seccomp-dev.yaml") + ":3:11: seccomp.files[0]: cannot read seccomp profile /dev/urandom: a device;"},
		{"extends: /dev/zero", []string{"--profile", f("extends-dev.yaml")}, false, f("extends-dev.yaml") + ":1:1: extends: /dev/zero: cannot read profile: a device;"},
		{"a directory as profile", []string{"--profile", dir}, false, dir + ": cannot read profile: a directory; give a regular file, or a pipe such as <(command)"},
		{"a socket as profile", []string{"--profile", f("socket.yaml")}, false, f("socket.yaml") + ": cannot read profile: a socket;"},
		{"a 100 MB profile", []string{"--profile", huge}, false, huge + ": cannot read profile: 104857600 bytes, more than the 128 KiB an input file may have"},
		{"an endless pipe as profile", []string{"--profile", "/dev/fd/3"}, true, "/dev/fd/3: cannot read profile: more than the 128 KiB an input file may have"},
		{"40 KB of [", []string{"--profile", f("deep.yaml")}, false, f("deep.yaml") + ":1:33: cannot decode policy: nested more than 32 levels deep (a profile needs 5); look for an unclosed [ or {"},
		{"long keys over many values", []string{"--profile", f("long-keys.yaml")}, false, f("long-keys.yaml") + ":"},
		{"merge keys over aliases", []string{"--profile", f("aliases.yaml")}, false, f("aliases.yaml") + ":3:16: cannot decode policy: the alias *a0: a profile may not use YAML aliases"},
		{"a file as writable root", []string{"--write", "/etc/passwd"}, false, "--write: filesystem.write[0]: writable root /etc/passwd is not a directory; a writable root is a directory: give the one that holds it (/etc), or bind the file read-only with read:"},
		{"a newline in a profile's name", []string{"--profile", f("a\nb.yaml")}, false, strconv.Quote(f("a\nb.yaml")) + ": cannot decode policy: the profile is empty"},
		{"a newline in a writable root", []string{"--write", f("new\nline")}, false, "--write: filesystem.write[0]: writable root " + strconv.Quote(f("new\nline")) + " does not exist; create it first (mkdir -p " + strconv.Quote(f("new\nline")) + ") or remove it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(t.TempDir(), "ran")
			var files []*os.File
			if c.pipe {
				files = append(files, endless(t))
			}
			r, rss := runMeasured(t, files, append(append([]string{"run"}, c.args...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "agentjail: ") || r.stdout != "" {
				t.Errorf("want one line on stderr and nothing on stdout; stdout %q, stderr %q", r.stdout, r.stderr)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
			// The bound leaves room for agentjail itself and the YAML
			// scanner's tokens, far below what the parser takes
			// unchecked (gigabytes).
			if rss > 200<<20 {
				t.Errorf("peak RSS %d MiB", rss>>20)
			}
		})
	}
}

// runMeasured runs agentjail with files from fd 3 on and returns its
// result and its peak resident set size in bytes (wait4's rusage, taken
// by the probe that starts it: see its rusage mode).
func runMeasured(t *testing.T, files []*os.File, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rssFile := filepath.Join(t.TempDir(), "rss")
	cmd := exec.CommandContext(ctx, sharedProbe(t), append([]string{"rusage", rssFile, agentjail}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.ExtraFiles = files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agentjail %q did not finish in a minute; stderr:\n%.2000s", args, stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Errorf("agentjail %q panicked:\n%s", args, stderr.String())
	}
	data, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("the probe measured nothing: %v", err)
	}
	rss, _ := strconv.ParseInt(string(data), 10, 64)
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}, rss
}

// TestSignalWhileReadingAPipe: a FIFO that no writer opens, as --profile
// or as --seccomp, leaves agentjail waiting, without a thread blocked in
// open(2) or read(2); SIGTERM or SIGINT then ends it with exit 125, a
// line naming the file, the signal and the record, and the setup_failed
// record.
// Before, the open blocked for ever and SIGTERM was caught and ignored.
func TestSignalWhileReadingAPipe(t *testing.T) {
	testutil.RequireBwrap(t)
	t.Parallel()
	for _, c := range []struct {
		flag string
		sig  syscall.Signal
	}{{"--profile", syscall.SIGTERM}, {"--profile", syscall.SIGINT}, {"--seccomp", syscall.SIGTERM}, {"--seccomp", syscall.SIGINT}} {
		t.Run(c.flag+" "+unix.SignalName(c.sig), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fifo, rec, marker := filepath.Join(dir, "fifo"), filepath.Join(dir, "record.json"), filepath.Join(dir, "ran")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			b := start(t, nil, "run", c.flag, fifo, "--record", rec, "--", "touch", marker)
			waitFor(t, func() bool { return holds(b.cmd.Process.Pid, fifo) })
			b.cmd.Process.Signal(c.sig)
			if code := b.wait(t); code != 125 {
				t.Errorf("exit %d, want 125; stderr:\n%s", code, b.stderr.String())
			}
			want := fifo + ": cannot read profile: interrupted by " + unix.SignalName(c.sig) + " while waiting on the pipe"
			if c.flag == "--seccomp" {
				want = "--seccomp: seccomp.files[0]: cannot read seccomp profile " + fifo + ": interrupted by " + unix.SignalName(c.sig) + " while waiting on the pipe"
			}
			if got, want := b.stderr.String(), "agentjail: "+want+"; the record: "+rec+"\n"; got != want {
				t.Errorf("stderr %q\nwant %q", got, want)
			}
			if got := readRecord(t, rec, 125); got.Reason != "setup_failed" {
				t.Errorf("record reason %s, want setup_failed", got.Reason)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}
}

// holds reports whether process pid has path open.
func holds(pid int, path string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == path {
			return true
		}
	}
	return false
}

// TestProfileFromAPipe: a profile may come from a pipe (`--profile
// <(gen)`), and from a FIFO whose writer comes after agentjail has opened
// it (the FIFO then first reads as its end, which must not pass for an
// empty profile).
func TestProfileFromAPipe(t *testing.T) {
	jailed(t)
	profile := "extends: tier1\nenvironment:\n  set: {FROM_PIPE: yes}\n"
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(profile)
	w.Close()
	res, _ := runMeasured(t, []*os.File{r}, "run", "--profile", "/dev/fd/3", "--", "sh", "-c", "echo $FROM_PIPE")
	r.Close()
	wantCode(t, res, 0)
	if res.stdout != "yes\n" {
		t.Errorf("pipe: stdout %q, stderr %q", res.stdout, res.stderr)
	}

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, nil, "run", "--profile", fifo, "--", "sh", "-c", "echo $FROM_PIPE")
	waitFor(t, func() bool { return holds(b.cmd.Process.Pid, fifo) })
	if err := os.WriteFile(fifo, []byte(profile), 0); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t); code != 0 || b.stdout.String() != "yes\n" {
		t.Errorf("FIFO: exit %d, stdout %q, stderr %q", code, b.stdout.String(), b.stderr.String())
	}
}

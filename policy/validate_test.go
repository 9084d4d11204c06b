package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateCollectsEveryProblemWithOrigin(t *testing.T) {
	t.Parallel()
	src := `user: root
inner_sandbox: loose
filesystem:
  base: tiny
  proc: host
  write:
    - relative/dir
    - /ok
    - ${TMPDIR}/x
    - /a/../b
  protect:
    - ".env"
    - "[unclosed"
  deny: ["~/.ssh", "~other/.ssh"]
  protect_depth: 99
  tmpfs:
    tmp: {size: 1M}
    /run: {mode: "0755"}
  credentials: [/etc/shadow]
environment:
  allow: [PATH, "LC_*", "BAD-NAME", CLAUDECODE]
  set: {"1X": v, CLAUDECODE: "1"}
  unset: ["A B"]
limits:
  rlimits: {nofiles: 10}
claude: {home: true, dir: relative/sessions}
codex: {credentials: true}
`
	p, err := Decode("v.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = Validate(p)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate = %v, want ErrInvalid", err)
	}
	// In the file's order, as a reader meets them.
	want := []string{
		"v.yaml:1:1: user: uid 0 is allowed only with inner_sandbox: sealed",
		`v.yaml:2:1: inner_sandbox: "loose" is not one of free, sealed`,
		`v.yaml:4:3: filesystem.base: "tiny" is not one of host, minimal`,
		`v.yaml:5:3: filesystem.proc: "host" is not one of fresh, fresh-or-bind`,
		`v.yaml:7:7: filesystem.write[0]: "relative/dir" must be absolute (start with /, ~/ or ${PWD}/)`,
		`v.yaml:9:7: filesystem.write[2]: "${TMPDIR}/x" uses an unknown variable`,
		`v.yaml:10:7: filesystem.write[3]: "/a/../b" contains a .. component`,
		`v.yaml:13:7: filesystem.protect[1]: "[unclosed" is not a valid pattern`,
		`v.yaml:14:20: filesystem.deny[1]: "~other/.ssh" must be absolute`,
		"v.yaml:15:3: filesystem.protect_depth: must be between 0 and 16",
		"v.yaml:17:5: filesystem.tmpfs[tmp]: mount point must be a clean absolute path",
		"v.yaml:18:5: filesystem.tmpfs[/run].size: every tmpfs needs a size cap",
		`v.yaml:19:17: filesystem.credentials[0]: "/etc/shadow" must be a path under ~`,
		`v.yaml:21:25: environment.allow[2]: "BAD-NAME" is not a variable name`,
		"v.yaml:21:37: environment.allow[3]: agentjail always removes CLAUDECODE from the jail's environment",
		`v.yaml:22:9: environment.set[1X]: "1X" is not a variable name`,
		"v.yaml:22:18: environment.set[CLAUDECODE]: agentjail always removes CLAUDECODE from the jail's environment",
		`v.yaml:23:11: environment.unset[0]: "A B" is not a variable name`,
		`v.yaml:25:13: limits.rlimits[nofiles]: unknown resource "nofiles"`,
		"v.yaml:26:10: claude.home: needs filesystem.home.private: true",
		`v.yaml:26:22: claude.dir: "relative/sessions" must be a clean absolute directory`,
		"v.yaml:27:9: codex.credentials: needs codex.home: true",
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), err)
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestValidateAcceptsVariables(t *testing.T) {
	t.Parallel()
	p, err := Decode("ok.yaml", []byte("inner_sandbox: sealed\nuser: root\nfilesystem:\n  write:\n    - ~/w\n    - ${HOME}/x\n    - ${PWD}\n    - ${PWD}/out\n  protect: [.env.*, sub/.git/hooks, /abs/.env]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
}

func TestNoLoosening(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"strict.yaml":  "inner_sandbox: sealed\nnetwork: {mode: none}\nfilesystem:\n  home: {private: true}\n",
		"loose.yaml":   "extends: strict\ninner_sandbox: free\nnetwork: {mode: proxy}\nseccomp: {default: false}\nfilesystem:\n  home: {private: false}\n",
		"proxied.yaml": "network: {mode: proxy}\n",
		"open.yaml":    "extends: proxied\nnetwork: {mode: host}\n",
	})
	_, err := l.Load("loose")
	for _, want := range []string{"inner_sandbox: free, but", "network.mode: proxy, but the profile it extends has none", "seccomp.default: false", "filesystem.home.private: false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(loose) = %v; want %q", err, want)
		}
	}
	if _, err := l.Load("open"); err == nil || !strings.Contains(err.Error(), "network.mode: host, but the profile it extends has proxy") {
		t.Errorf("Load(open) = %v", err)
	}
}

// TestDecodeReportsEveryWrongValue: the decoder stops at the first value
// it cannot take; Decode cuts each out and goes on, so one run of the
// operator's fix-and-retry loop sees them all, each at its own line.
func TestDecodeReportsEveryWrongValue(t *testing.T) {
	t.Parallel()
	src := `limits:
  wall: -5s
  idle: abc
  rlimits: {nproc: -1}
filesystem:
  tmpfs:
    /cache: {size: big, mode: 99x}
seccomp:
  default: "yes"
`
	_, err := Decode("d.yaml", []byte(src))
	if err == nil {
		t.Fatal("Decode accepted wrong values")
	}
	for _, want := range []string{
		`d.yaml:2:9: limits.wall: duration "-5s" is negative`,
		`d.yaml:3:9: limits.idle: invalid duration "abc"`,
		`d.yaml:4:20: limits.rlimits[nproc]: invalid limit "-1"`,
		`d.yaml:7:20: filesystem.tmpfs[/cache].size: invalid size "big"`,
		`d.yaml:7:31: filesystem.tmpfs[/cache].mode: invalid mode "99x"`,
		"d.yaml:9:12: seccomp.default: expected true or false, got a string",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%s", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 6 {
		t.Errorf("%d errors, want 6:\n%s", n, err)
	}
	if !errors.Is(err, ErrSyntax) {
		t.Errorf("not ErrSyntax: %v", err)
	}
}

// TestDecodeCutsTheEntryAtTheErrorsPosition: a top-level key spelled
// "filesystem.x" and x under filesystem share a path string; each is
// reported once, at its own line.
func TestDecodeCutsTheEntryAtTheErrorsPosition(t *testing.T) {
	t.Parallel()
	_, err := Decode("p.yaml", []byte("filesystem.x: 1\nfilesystem:\n  x: 1\n"))
	if err == nil {
		t.Fatal("Decode accepted unknown keys")
	}
	for _, want := range []string{"p.yaml:1:1:", "p.yaml:3:3:"} {
		if strings.Count(err.Error(), want) != 1 {
			t.Errorf("want one error at %s:\n%s", want, err)
		}
	}
}

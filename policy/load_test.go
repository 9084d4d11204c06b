package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestDecodeErrorsNamePosition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src, want string
	}{
		{"a tab", "filesystem:\n\twrite: [/x]\n", "p.yaml:2:1: cannot decode policy: found character '\t' that cannot start any token (YAML indents with spaces, never tabs: replace the tab)"},
		{"unknown key", "filesystem:\n  writable: [/x]\n", `p.yaml:2:3: filesystem.writable: unknown key; filesystem takes base, proc, read, write, protect,`},
		{"retired key", "claude: {home: true, write_back: false}\n", "p.yaml:1:22: claude.write_back: removed: agentjail no longer writes a login back to the operator's credentials (whatever the agent wrote there would become the operator's login); remove the key"},
		{"unknown top key", "description: x\nbogus: 1\n", `p.yaml:2:1: bogus: unknown key; a profile takes extends, description, user,`},
		{"string for a list", "filesystem:\n  write: /x\n", "p.yaml:2:10: filesystem.write: expected a list, got a string; e.g. `write: [\"${PWD}\"]`"},
		{"unquoted ${PWD} in a flow list", "filesystem:\n  write: [/ok, ${PWD}/out]\n", `p.yaml:2:17: cannot decode policy: ',' or ']' must be specified (inside [ ] or { } YAML reads the { of ${...} as a mapping: quote the value, "${PWD}/out")`},
		{"unquoted ${HOME} in a flow mapping", "environment:\n  set: {A: ${HOME}}\n", `(inside [ ] or { } YAML reads the { of ${...} as a mapping: quote the value, "${HOME}")`},
		{"string for an int", "filesystem:\n  protect_depth: deep\n", "p.yaml:2:18: filesystem.protect_depth: expected a whole number, got a string; e.g. `protect_depth: 3`"},
		{"quoted number for an int", "limits:\n  pids: \"100\"\n", "p.yaml:2:9: limits.pids: expected a whole number, got a string; e.g. `pids: 3` (a number in quotes is a string: write it without them)"},
		{"string for a bool", "seccomp:\n  default: \"yes\"\n", "p.yaml:2:12: seccomp.default: expected true or false, got a string; e.g. `default: true`"},
		{"retired namespaces", "namespaces:\n  net: true\n", "p.yaml:1:1: namespaces: removed: network.mode replaces namespaces.net: write `network: {mode: none}`"},
		{"list for the network mode", "network:\n  mode: [proxy]\n", "p.yaml:2:9: network.mode: expected one of host, none, proxy, got a list; e.g. `mode: host`"},
		{"number for a bool", "filesystem:\n  home:\n    private: 1\n", "p.yaml:3:14: filesystem.home.private: expected true or false, got a number; e.g. `private: true`"},
		{"list for a duration", "limits:\n  wall: [10m]\n", "p.yaml:2:9: limits.wall: expected a duration (90s, 10m or a number of seconds), got a list; e.g. `wall: 10m`"},
		{"bool for a size", "limits:\n  output:\n    head: true\n", "p.yaml:3:11: limits.output.head: expected a size (64MiB, 1G or a number of bytes), got true or false; e.g. `head: 64MiB`"},
		{"list for a limit", "limits:\n  rlimits:\n    nofile: [1]\n", "p.yaml:3:13: limits.rlimits[nofile]: expected a number, a size or unlimited, got a list; e.g. `nofile: 1024`"},
		{"mapping for a list entry", "filesystem:\n  write:\n    - {a: b}\n", "p.yaml:3:7: filesystem.write[0]: expected a string, got a mapping; e.g. `- ${PWD}`"},
		{"list for an enum", "inner_sandbox: [a]\n", "p.yaml:1:16: inner_sandbox: expected one of free, sealed, got a list; e.g. `inner_sandbox: free`"},
		{"number for a struct", "limits:\n  output: 4\n", "p.yaml:2:11: limits.output: expected a mapping with the keys head, tail, got a number; e.g. `output: {head: 64MiB}`"},
		{"number for a tmpfs", "filesystem:\n  tmpfs:\n    /tmp: 5\n", "p.yaml:3:11: filesystem.tmpfs[/tmp]: expected a mapping with the keys size, mode, got a number; e.g. `/tmp: {size: 64MiB}`"},
		{"list for a map", "environment:\n  set: [1]\n", "p.yaml:2:8: environment.set: expected a mapping, got a list; e.g. `set: {NAME: value}`"},
		{"list for a map value", "environment:\n  set:\n    A: [1]\n", "p.yaml:3:8: environment.set[A]: expected a string, got a list; e.g. `A: value`"},
		{"block mapping for a string", "user:\n  a: b\n", "user: expected a string, got a mapping; e.g. `user: builder`"},
		{"overflow", "filesystem:\n  protect_depth: 99999999999999999999999\n", "p.yaml:2:18: filesystem.protect_depth: 99999999999999999999999 is out of range"},
		{"duplicate key", "user: a\nuser: b\n", `p.yaml:2:1: cannot decode policy: mapping key "user" already defined`},
		{"second document", "user: a\n---\nuser: b\n", "p.yaml:2:1: cannot decode policy: a profile is one YAML document"},
		{"not a mapping", "- a\n- b\n", "p.yaml:1:1: cannot decode policy: a profile is a mapping"},
		{"bad duration", "limits:\n  wall: 10 minutes\n", `p.yaml:2:9: limits.wall: invalid duration "10 minutes"`},
		{"negative duration", "limits:\n  idle: -5\n", `p.yaml:2:9: limits.idle: duration "-5" is negative`},
		{"bad size", "filesystem:\n  tmpfs:\n    /tmp: {size: lots}\n", `p.yaml:3:18: filesystem.tmpfs[/tmp].size: invalid size "lots"`},
		{"bad mode", "filesystem:\n  tmpfs:\n    /tmp:\n      mode: abc\n", `p.yaml:4:13: filesystem.tmpfs[/tmp].mode: invalid mode "abc"`},
		{"syntax", "filesystem: [\n", "p.yaml:1:13: cannot decode policy: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode("p.yaml", []byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "p.yaml:") || !errors.Is(err, ErrSyntax) {
				t.Fatalf("Decode error = %v; want prefix %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestDecodeOrigins(t *testing.T) {
	t.Parallel()
	p, err := Decode("o.yaml", []byte("filesystem:\n  write:\n    - /a\n    - /b\n  tmpfs:\n    /tmp: {size: 1M}\nlimits:\n  wall: 5m\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"filesystem.write[1]":         "o.yaml:4:7",
		"filesystem.tmpfs[/tmp]":      "o.yaml:6:5",
		"filesystem.tmpfs[/tmp].size": "o.yaml:6:12",
		"limits.wall":                 "o.yaml:8:3",
		"limits.wall.nothing":         "o.yaml:8:3",
	} {
		if got := p.Origins.Of(path); got != want {
			t.Errorf("Origins.Of(%s) = %q, want %q", path, got, want)
		}
	}
}

// TestErrorsNameFieldsAsTheirFileHasThem: a child's list entry comes after
// its parents' in the merged profile, but an error names it by its index in
// the child's own file, beside that file's line.
func TestErrorsNameFieldsAsTheirFileHasThem(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"base.yaml":          "filesystem:\n  read: [/a, /b, /c]\n",
		"disk:/p/child.yaml": "extends: base\nfilesystem:\n  read:\n    - /ok\n    - relative/path\n",
	})
	p, err := l.Load("/p/child.yaml")
	if err == nil {
		err = Validate(p)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Load = %v, want a FieldError", err)
	}
	if fe.Field != "filesystem.read[1]" || !strings.HasPrefix(fe.Origin, "/p/child.yaml:5:") {
		t.Errorf("the error names %s at %s, want filesystem.read[1] at /p/child.yaml:5: (%v)", fe.Field, fe.Origin, err)
	}
}

func testLoader(files map[string]string) Loader {
	builtins := fstest.MapFS{}
	for name, src := range files {
		builtins[name] = &fstest.MapFile{Data: []byte(src)}
	}
	return Loader{Builtins: builtins, ReadFile: func(name string) ([]byte, error) {
		if src, ok := files["disk:"+name]; ok {
			return []byte(src), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}}
}

func TestExtendsMerges(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"_root.yaml":             "description: root\nfilesystem:\n  deny: [/secret]\n  protect: [.env]\n  protect_depth: 2\n  tmpfs:\n    /tmp: {size: 1M}\nenvironment:\n  set: {A: root, B: root}\nlimits:\n  wall: 1m\n  idle: 30s\n",
		"mid.yaml":               "extends: _root\ndescription: mid\nfilesystem:\n  deny: [/other]\n  tmpfs:\n    /tmp: {size: 2M}\n    /run: {size: 1M}\nenvironment:\n  set: {B: mid}\nlimits:\n  wall: 2m\n",
		"disk:/etc/aj/leaf.yaml": "extends: ../aj/base.yaml\nfilesystem:\n  write: [/w]\n",
		"disk:/etc/aj/base.yaml": "extends: mid\nfilesystem:\n  protect: [.git/hooks]\n  protect_depth: 4\n",
	})
	p, err := l.Load("/etc/aj/leaf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Filesystem.Deny, ","); got != "/secret,/other" {
		t.Errorf("deny = %s: lists must append, parent first", got)
	}
	if got := strings.Join(p.Filesystem.Protect, ","); got != ".env,.git/hooks" {
		t.Errorf("protect = %s", got)
	}
	// A description is its own profile's: the leaf's says nothing.
	if p.Description != "" || *p.Filesystem.ProtectDepth != 4 || p.Extends != "" {
		t.Errorf("scalars: description %q, depth %d, extends %q", p.Description, *p.Filesystem.ProtectDepth, p.Extends)
	}
	if mid, err := l.Load("mid"); err != nil || mid.Description != "mid" {
		t.Errorf("mid's description: %q, %v", mid.Description, err)
	}
	if p.Filesystem.Tmpfs["/tmp"].Size != 2<<20 || p.Filesystem.Tmpfs["/run"].Size != 1<<20 {
		t.Errorf("tmpfs = %v: maps merge key by key, child wins", p.Filesystem.Tmpfs)
	}
	if p.Environment.Set["A"] != "root" || p.Environment.Set["B"] != "mid" {
		t.Errorf("env set = %v", p.Environment.Set)
	}
	if time := p.Limits.Wall.String() + "," + p.Limits.Idle.String(); time != "2m0s,30s" {
		t.Errorf("limits = %s", time)
	}
	for path, want := range map[string]string{
		"filesystem.deny[0]":     "profiles/_root.yaml:3:10",
		"filesystem.deny[1]":     "profiles/mid.yaml:4:10",
		"filesystem.protect[1]":  "/etc/aj/base.yaml:3:13",
		"filesystem.write[0]":    "/etc/aj/leaf.yaml:3:11",
		"limits.wall":            "profiles/mid.yaml:11:3",
		"limits.idle":            "profiles/_root.yaml:12:3",
		"filesystem.tmpfs[/tmp]": "profiles/mid.yaml:6:5",
	} {
		if got := p.Origins.Of(path); got != want {
			t.Errorf("origin of %s = %q, want %q", path, got, want)
		}
	}
	// What the operator set, and what came with built-in profiles.
	for origin, want := range map[string]bool{
		p.Origins["limits.idle"]: true, p.Origins["limits.wall"]: true, p.Origins["filesystem.write[0]"]: false,
		p.Origins["filesystem.protect[1]"]: false, "--timeout": false, "profiles/nosuch.yaml:1:1": false, "profiles/x/mid.yaml:1:1": false,
	} {
		if got := l.IsBuiltinOrigin(origin); got != want {
			t.Errorf("IsBuiltinOrigin(%q) = %v", origin, got)
		}
	}
}

func TestExtendsRefusals(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"a.yaml":          "extends: b\n",
		"b.yaml":          "extends: a\n",
		"deep.yaml":       "filesystem:\n  protect_depth: 3\n",
		"shallow.yaml":    "extends: deep\nfilesystem:\n  protect_depth: 1\n",
		"_hidden.yaml":    "description: x\n",
		"strictproc.yaml": "filesystem:\n  proc: fresh\n",
		"laxproc.yaml":    "extends: strictproc\nfilesystem:\n  proc: fresh-or-bind\n",
		"badparent.yaml":  "extends: nosuch\n",
		"disk:/x/f.yaml":  "extends: missing.yaml\n",
		"nolinks.yaml":    "filesystem:\n  accept_protected_symlinks: false\n",
		"links.yaml":      "extends: nolinks\nfilesystem:\n  accept_protected_symlinks: true\n",
	})
	for ref, want := range map[string]string{
		"a":              "profiles/b.yaml:1:1: extends: cycle: profiles/a.yaml -> profiles/b.yaml -> profiles/a.yaml (remove one of the extends:)",
		"shallow":        "profiles/shallow.yaml:3:3: filesystem.protect_depth: 1 is lower than the 3",
		"laxproc":        "profiles/laxproc.yaml:3:3: filesystem.proc: fresh-or-bind, but the profile it extends insists on a fresh /proc; a child profile cannot loosen",
		"links":          "profiles/links.yaml:3:3: filesystem.accept_protected_symlinks: true, but the profile it extends refuses symlinked protected paths",
		"nosuch":         `unknown profile "nosuch": built-in profiles are a, b, badparent, deep, laxproc, links, nolinks, shallow, strictproc`,
		"_hidden":        `unknown profile "_hidden"`,
		"badparent":      `profiles/badparent.yaml:1:1: extends: unknown profile "nosuch"`,
		"/x/f.yaml":      "unknown profile: /x/missing.yaml: no such file",
		"./nothere.yaml": "./nothere.yaml: no such file",
	} {
		_, err := l.Load(ref)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) = %v; want %q", ref, err, want)
		}
		if ref == "a" && err != nil && err.Error() != want {
			t.Errorf("a cycle is said once, at the extends: that closes it: %v", err)
		}
	}
}

func TestBuiltinProfilesLoadAndValidate(t *testing.T) {
	t.Parallel()
	l := Loader{Builtins: os.DirFS("../profiles")}
	names := l.BuiltinNames()
	if strings.Join(names, ",") != "sealed,tier1,tier2,tier3" {
		t.Fatalf("built-ins = %v", names)
	}
	for _, n := range names {
		p, err := l.Load(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if err := Validate(p); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if p.Description == "" || p.Limits.Wall == nil || p.Limits.Idle == nil {
			t.Errorf("%s: every tier needs a description and wall and idle limits", n)
		}
		if p.Filesystem.Tmpfs["/tmp"].Size <= 0 || p.Filesystem.Tmpfs["/tmp"].Size > 1<<30 {
			t.Errorf("%s: /tmp must be capped at <= 1GiB", n)
		}
	}
	if m, _ := filepath.Glob("../profiles/*.yaml"); len(m) < len(names) {
		t.Errorf("glob found %d files", len(m))
	}
}

// TestDecodeNeverPanics: inputs the YAML library panics on (FuzzLoad
// found them) end in an error naming the file.
func TestDecodeNeverPanics(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"filesystem:\n  write: !!seq\n", "filesystem:\n  protect: !x\n", "filesystem:\n  protect: !\"*.pem\",]\n"} {
		_, err := Decode("p.yaml", []byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), "p.yaml: cannot decode policy: ") || !errors.Is(err, ErrSyntax) {
			t.Errorf("Decode(%q) = %v", src, err)
		}
	}
}

// TestQuotedNumbersAndTheRest: a number in quotes is said with every other
// wrong value of the same mapping, not instead of them.
func TestQuotedNumbersAndTheRest(t *testing.T) {
	t.Parallel()
	_, err := Decode("p.yaml", []byte("limits:\n  pids: \"100\"\n  wall: [1]\nfilesystem:\n  protect_depth: '5'\n"))
	for _, want := range []string{"p.yaml:2:9: limits.pids: expected a whole number, got a string", "p.yaml:3:9: limits.wall: expected a duration", "p.yaml:5:18: filesystem.protect_depth: expected a whole number, got a string"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode = %v\nwant it to say %q", err, want)
		}
	}
}

// TestTmpfsEntriesMergeFieldByField: a child's tmpfs entry for a mount
// point its parent has keeps what it does not set (maps merge, to the
// field): a new size keeps the mode, a new mode the size.
func TestTmpfsEntriesMergeFieldByField(t *testing.T) {
	t.Parallel()
	l := testLoader(map[string]string{
		"base.yaml": "filesystem:\n  tmpfs:\n    /tmp: {size: 1G, mode: \"1777\"}\n",
		"size.yaml": "extends: base\nfilesystem:\n  tmpfs:\n    /tmp: {size: 128M}\n",
		"mode.yaml": "extends: base\nfilesystem:\n  tmpfs:\n    /tmp: {mode: \"0700\"}\n",
	})
	for name, want := range map[string]string{"size": "134217728 1777", "mode": "1073741824 700"} {
		p, err := l.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		tm := p.Filesystem.Tmpfs["/tmp"]
		if got := fmt.Sprintf("%d %o", tm.Size, tm.Mode); got != want {
			t.Errorf("%s: /tmp is %s, want %s", name, got, want)
		}
	}
}

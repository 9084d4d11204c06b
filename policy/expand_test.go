package policy

import (
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	p, err := Decode("x.yaml", []byte(`filesystem:
  write:
    - ~/work
    - ${PWD}/out
  read: [/opt/tools]
  protect:
    - .env
    - ~/.bashrc
  deny:
    - ~/.ssh
    - ${HOME}/.aws
    - /etc/secret
seccomp:
  files: ["${PWD}/extra.json"]
`))
	if err != nil {
		t.Fatal(err)
	}
	v := Vars{SecretHomes: []string{"/root", "/home/op", "/home/agent"}, RunHome: "/home/agent", PWD: "/srv/proj"}
	e := Expand(p, v)
	for name, c := range map[string]struct{ got, want []string }{
		"write":   {e.Filesystem.Write, []string{"/home/agent/work", "/srv/proj/out"}},
		"read":    {e.Filesystem.Read, []string{"/opt/tools"}},
		"protect": {e.Filesystem.Protect, []string{".env", "/root/.bashrc", "/home/op/.bashrc", "/home/agent/.bashrc"}},
		"deny": {e.Filesystem.Deny, []string{"/root/.ssh", "/home/op/.ssh", "/home/agent/.ssh",
			"/root/.aws", "/home/op/.aws", "/home/agent/.aws", "/etc/secret"}},
		"seccomp": {e.Seccomp.Files, []string{"/srv/proj/extra.json"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %q, want %q", name, c.got, c.want)
		}
	}
	// Origins follow the entries: deny[4] came from deny[1] (line 11).
	for path, want := range map[string]string{
		"filesystem.deny[2]":  "x.yaml:10:7",
		"filesystem.deny[4]":  "x.yaml:11:7",
		"filesystem.deny[6]":  "x.yaml:12:7",
		"filesystem.write[1]": "x.yaml:4:7",
	} {
		if got := e.Origins.Of(path); got != want {
			t.Errorf("origin of %s = %q, want %q", path, got, want)
		}
	}
	// And their names in the file: deny[4] is the file's deny[1].
	for path, want := range map[string]string{
		"filesystem.deny[2]":  "filesystem.deny[0]",
		"filesystem.deny[4]":  "filesystem.deny[1]",
		"filesystem.deny[6]":  "filesystem.deny[2]",
		"filesystem.write[1]": "filesystem.write[1]",
	} {
		if got := e.FieldName(path); got != want {
			t.Errorf("name of %s = %q, want %q", path, got, want)
		}
	}
	// The input is left alone.
	if p.Filesystem.Deny[0] != "~/.ssh" {
		t.Errorf("Expand changed its input: %q", p.Filesystem.Deny)
	}
}

func TestExpandPathDeduplicatesHomes(t *testing.T) {
	t.Parallel()
	p := Policy{Filesystem: Filesystem{Deny: []string{"~/.ssh"}}}
	e := Expand(p, Vars{SecretHomes: []string{"/root", "/root", ""}})
	if !slices.Equal(e.Filesystem.Deny, []string{"/root/.ssh"}) {
		t.Errorf("deny = %q", e.Filesystem.Deny)
	}
	if got := ExpandPath("~", []string{"/h"}, ""); !slices.Equal(got, []string{"/h"}) {
		t.Errorf("ExpandPath(~) = %q", got)
	}
	if got := ExpandPath("~user/x", []string{"/h"}, ""); !slices.Equal(got, []string{"~user/x"}) {
		t.Errorf("ExpandPath(~user/x) = %q", got)
	}
}

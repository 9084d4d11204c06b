package policy

import (
	"reflect"
	"strings"
	"testing"
)

// TestEveryFieldHasAnExpectation: a wrong-type message exists for every
// field a profile can set, says it in words (never a Go type) and gives an
// example, so a new field cannot fall back to the YAML library's text.
func TestEveryFieldHasAnExpectation(t *testing.T) {
	t.Parallel()
	var walk func(typ reflect.Type, path string)
	n := 0
	walk = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			p := joinPath(path, name)
			ft := typeAt(p)
			if ft == nil {
				t.Errorf("%s: typeAt found no type", p)
				continue
			}
			n++
			msg := mismatchMsg(p, nil)
			if strings.Contains(msg, "policy.") || strings.Contains(msg, "...") || !strings.Contains(msg, "e.g. `"+name+": ") {
				t.Errorf("%s: %s", p, msg)
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, p)
			}
		}
	}
	walk(reflect.TypeFor[Policy](), "")
	if n < 30 {
		t.Errorf("walked %d fields, want every field of Policy", n)
	}
	for path, want := range map[string]string{
		"filesystem.write[3]":          "expected a string, got nothing; e.g. `- ${PWD}`",
		"filesystem.tmpfs[/run].mode":  "expected an octal mode (such as \"0700\"), got nothing; e.g. `mode: \"0700\"`",
		"environment.set[FOO]":         "expected a string, got nothing; e.g. `FOO: value`",
		"limits.rlimits":               "expected a mapping, got nothing; e.g. `rlimits: {nofile: 1024}`",
		"filesystem.proc":              "expected one of fresh, fresh-or-bind, got nothing; e.g. `proc: fresh`",
		"claude":                       "expected a mapping with the keys home, credentials, settings, dir, got nothing; e.g. `claude: {home: true}`",
		"filesystem.tmpfs[/tmp].bogus": "a value of the wrong type (see `agentjail schema`)",
	} {
		if got := mismatchMsg(path, nil); got != want {
			t.Errorf("mismatchMsg(%s) = %q, want %q", path, got, want)
		}
	}
}

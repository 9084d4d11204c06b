package profiles_test

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/profiles"
	"github.com/agentjail/agentjail/profiles/internal/gosrc"
)

// TestCompiledIsCurrent: compiled.go is what the YAML generates now, and
// every profile loads from it exactly as from the YAML.
func TestCompiledIsCurrent(t *testing.T) {
	t.Parallel()
	src, err := gosrc.Source()
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile("compiled.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, current) {
		t.Fatal("profiles/compiled.go is stale: run `go generate ./profiles`")
	}
	yamlLoader := policy.Loader{Builtins: profiles.FS}
	fastLoader := policy.Loader{Builtins: profiles.FS, Precompiled: profiles.Precompiled}
	for _, name := range yamlLoader.BuiltinNames() {
		want, err := yamlLoader.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fastLoader.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the snapshot loads differently from the YAML:\n%+v\n%+v", name, got, want)
		}
	}
	// Each call builds a fresh value: a caller changing it changes nothing
	// for the next.
	a, _ := profiles.Precompiled("tier1")
	a.Filesystem.Deny[0] = "changed"
	b, _ := profiles.Precompiled("tier1")
	if b.Filesystem.Deny[0] == "changed" {
		t.Error("Precompiled shares its slices")
	}
	if _, ok := profiles.Precompiled("nope"); ok {
		t.Error("an unknown profile was found")
	}
}

// Package profiles holds agentjail's built-in policy profiles, embedded in
// the binary. Each NAME.yaml is a profile `--profile NAME` selects; files
// whose name starts with _ are shared parents, extended but not listed.
// compiled.go holds the same profiles loaded and merged at build time, so a
// launch parses no YAML; profiles_test.go fails when it is stale
// (`go generate ./profiles` rewrites it).
//
// It holds data only; policy/ decodes and merges it.
package profiles

//go:generate go run ./gen

import (
	"embed"

	"github.com/agentjail/agentjail/policy"
)

// FS holds the built-in profiles' YAML.
//
//go:embed *.yaml
var FS embed.FS

// Precompiled returns a built-in profile (a fresh copy) from the build-time
// snapshot.
func Precompiled(name string) (policy.Policy, bool) {
	build, ok := compiled[name]
	if !ok {
		return policy.Policy{}, false
	}
	return build(), true
}

// Package profiles holds agentjail's built-in policy profiles, embedded in
// the binary. Each NAME.yaml is a profile `--profile NAME` selects; files
// whose name starts with _ are shared parents, extended but not listed.
//
// It holds data only; policy/ decodes and merges it.
package profiles

import "embed"

// FS holds the built-in profiles.
//
//go:embed *.yaml
var FS embed.FS

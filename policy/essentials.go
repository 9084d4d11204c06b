package policy

import (
	"fmt"
	"strings"
)

// essentials refuses a profile file that extends nothing yet lacks what
// every jail needs to be bounded: a cap on its tasks (limits.pids), on its
// memory (limits.memory: tmpfs pages are charged to it too) and a sized
// /tmp (filesystem.tmpfs./tmp). Without them `{}` or `description: x` was
// a jail with no cap at all. A profile that extends another gets them from
// it (a child may change a limit, never remove it); the built-in profiles
// all extend _base, which sets them.
func essentials(name string, p Policy) error {
	var missing []string
	if p.Limits.Pids == nil {
		missing = append(missing, "limits.pids")
	}
	if p.Limits.Memory == nil {
		missing = append(missing, "limits.memory")
	}
	if t, ok := p.Filesystem.Tmpfs["/tmp"]; !ok || t.Size <= 0 {
		missing = append(missing, "a sized filesystem.tmpfs /tmp")
	}
	if len(missing) == 0 {
		return nil
	}
	return &FieldError{Origin: Quote(name) + ":1:1", Field: "extends", Msg: fmt.Sprintf(
		"none, and the profile lacks %s, without which its jail has no cap; add `extends: tier1` (or another profile), or set them", strings.Join(missing, ", "))}
}

package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestEssentials: a profile file that extends nothing must cap the jail's
// tasks, memory and /tmp itself; `{}` or `description: x` was a jail with
// none of them. Built-in profiles and files that extend one get them from
// their parent.
func TestEssentials(t *testing.T) {
	t.Parallel()
	full := "limits:\n  pids: 64\n  memory: 1GiB\nfilesystem:\n  tmpfs:\n    /tmp: {size: 64MiB}\n"
	l := testLoader(map[string]string{
		"base.yaml":          "limits:\n  pids: 4096\n  memory: 50%\nfilesystem:\n  tmpfs:\n    /tmp: {size: 1GiB}\n",
		"disk:/p/empty.yaml": "{}\n",
		"disk:/p/desc.yaml":  "description: x\n",
		"disk:/p/some.yaml":  "limits:\n  pids: 64\nfilesystem:\n  tmpfs:\n    /tmp: {size: 0}\n",
		"disk:/p/child.yaml": "extends: ./desc.yaml\n",
		"disk:/p/full.yaml":  full,
		"disk:/p/ext.yaml":   "extends: base\ndescription: x\n",
	})
	all := "limits.pids, limits.memory, a sized filesystem.tmpfs /tmp"
	for ref, want := range map[string]string{
		"/p/empty.yaml": "/p/empty.yaml:1:1: extends: none, and the profile lacks " + all + ", without which its jail has no cap; add `extends: tier1`",
		"/p/desc.yaml":  "/p/desc.yaml:1:1: extends: none, and the profile lacks " + all,
		"/p/some.yaml":  "/p/some.yaml:1:1: extends: none, and the profile lacks limits.memory, a sized filesystem.tmpfs /tmp,",
		"/p/child.yaml": "/p/desc.yaml:1:1: extends: none",
		"/p/full.yaml":  "",
		"/p/ext.yaml":   "",
		"base":          "",
	} {
		_, err := l.Load(ref)
		switch {
		case want == "" && err != nil:
			t.Errorf("Load(%s): %v", ref, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("Load(%s) = %v; want %q", ref, err, want)
		}
	}
}

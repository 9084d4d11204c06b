package mounts

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/record"
)

func TestProtectedChanges(t *testing.T) {
	t.Parallel()
	file := func(ino uint64) Entry { return Entry{Mode: 0o644, Size: 1, Ino: ino, Ctime: 1} }
	dir := func(ino uint64, ctime int64) Entry {
		return Entry{Mode: fs.ModeDir | 0o755, Ino: ino, Ctime: ctime}
	}
	before := Snapshot{
		"/p/.env":                 file(1),
		"/p/.git/hooks":           dir(2, 1),
		"/p/.git/hooks/pre-push":  file(3),
		"/p/.git/config":          file(4),
		"/p/sub/.git/hooks":       dir(5, 1),
		"/p/sub/.git/config":      file(6),
		"/p/unchanged/.vscode":    dir(7, 1),
		"/p/unchanged/.vscode/on": file(8),
	}
	after := Snapshot{
		"/p/.env":                  file(1),
		"/p/.git/hooks":            dir(2, 2), // a hook was added: told by the hook
		"/p/.git/hooks/pre-push":   file(3),
		"/p/.git/hooks/pre-commit": file(9),
		"/p/.git/config":           {Mode: 0o644, Size: 1, Ino: 4, Ctime: 2}, // chmod or write
		// sub was moved to sub2 and a new sub/.git/hooks made.
		"/p/sub2/.git/hooks":           dir(5, 1),
		"/p/sub2/.git/config":          file(6),
		"/p/sub/.git/hooks":            dir(10, 3),
		"/p/sub/.git/hooks/x":          file(11),
		"/p/new/.claude/commands":      dir(12, 3),
		"/p/new/.claude/commands/c.md": file(13),
		"/p/unchanged/.vscode":         dir(7, 1),
		"/p/unchanged/.vscode/on":      file(8),
	}
	got := ProtectedChanges(before, after)
	want := []string{
		"/p/.git/config changed",
		"/p/.git/hooks/pre-commit appeared",
		"/p/new/.claude/commands appeared",
		"/p/sub/.git/config went away",
		"/p/sub/.git/hooks was replaced",
		"/p/sub2/.git/config appeared",
		"/p/sub2/.git/hooks appeared",
	}
	var lines []string
	for _, n := range got {
		if n.What != record.ViolationProtected {
			t.Errorf("what = %q", n.What)
		}
		lines = append(lines, n.Detail[:strings.Index(n.Detail, " during the run")])
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if n := ProtectedChanges(before, before); len(n) != 0 {
		t.Errorf("no change, yet %v", n)
	}
}

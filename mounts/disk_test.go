package mounts

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
)

// TestPlaceholderDisk: another run's mask placeholder, an empty file or an
// empty directory, counts as missing; a placeholder path that holds
// something, and an empty one that is no placeholder, are there.
func TestPlaceholderDisk(t *testing.T) {
	d := placeholderDisk{fstest.MapFS{
		"p/.env":       {},
		"p/.git/hooks": {Mode: fs.ModeDir},
		"p/.claude/x":  {Data: []byte("x")},
		"p/full.env":   {Data: []byte("SECRET=1")},
		"p/empty":      {},
		"p/emptydir":   {Mode: fs.ModeDir},
	}, func(p string) bool {
		return p == "/p/.env" || p == "/p/.git/hooks" || p == "/p/.claude" || p == "/p/full.env"
	}}
	for name, missing := range map[string]bool{
		"p/.env": true, "p/.git/hooks": true,
		"p/.claude": false, "p/full.env": false, "p/empty": false, "p/emptydir": false,
	} {
		_, err := d.Lstat(name)
		if got := errors.Is(err, fs.ErrNotExist); got != missing || !missing && err != nil {
			t.Errorf("Lstat(%s) = %v, want missing %v", name, err, missing)
		}
	}
}

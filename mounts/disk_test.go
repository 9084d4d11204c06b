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

// vanishing is a Disk on which name goes after its first Lstat: another
// run's placeholder, removed (and its entry after it) between the walk's
// look and its question to the registry.
type vanishing struct {
	fstest.MapFS
	name string
}

func (v vanishing) Lstat(name string) (fs.FileInfo, error) {
	fi, err := v.MapFS.Lstat(name)
	if name == v.name {
		delete(v.MapFS, name)
	}
	return fi, err
}

// TestPlaceholderDiskWithoutALook: asked without the registry's lock, an
// empty path not registered when asked is the user's only if it is still
// there after the question; one that went meanwhile was a placeholder
// being removed, and counts as missing, not as a protected path that
// appeared (the walks after a run take no look: they last as long as the
// agent made them to, and held up every other run's removals).
func TestPlaceholderDiskWithoutALook(t *testing.T) {
	t.Parallel()
	d := placeholderDisk{vanishing{fstest.MapFS{"p/.env": {}, "p/kept.env": {}}, "p/.env"}, func(string) bool { return false }}
	if _, err := d.Lstat("p/.env"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a placeholder removed during the question: %v, want missing", err)
	}
	if _, err := d.Lstat("p/kept.env"); err != nil {
		t.Errorf("the user's empty file: %v, want there", err)
	}
}

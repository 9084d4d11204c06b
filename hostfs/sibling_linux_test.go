package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSibling: a sibling is used only when it is a regular executable,
// not a symlink, that only root or agentjail's owner could have put there;
// a missing one is fs.ErrNotExist whatever its directory (agentjail run
// from a directory anyone can write has nothing to warn of when it has no
// sibling), and a present one in such a directory is refused.
func TestSibling(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: its cases give files to another uid")
	}
	for _, c := range []struct {
		name    string
		setup   func(dir string) // dir holds agentjail, the running executable
		missing bool             // fs.ErrNotExist
		refused string           // the error names this; "" for used
	}{
		{"used", func(dir string) { exe(t, dir, "agentjail-exec", 0o755) }, false, ""},
		{"missing", func(string) {}, true, ""},
		{"missing in an open directory", func(dir string) { os.Chmod(dir, 0o1777) }, true, ""},
		{"in an open directory", func(dir string) { exe(t, dir, "agentjail-exec", 0o755); os.Chmod(dir, 0o1777) }, false, "could put an agentjail-exec there"},
		{"a symlink", func(dir string) {
			exe(t, dir, "real", 0o755)
			os.Symlink("real", filepath.Join(dir, "agentjail-exec"))
		}, false, "is a symlink"},
		{"not executable", func(dir string) { exe(t, dir, "agentjail-exec", 0o644) }, false, "not an executable file"},
		{"writable by others", func(dir string) { exe(t, dir, "agentjail-exec", 0o757) }, false, "writable by others"},
		{"a directory", func(dir string) { os.Mkdir(filepath.Join(dir, "agentjail-exec"), 0o755) }, false, "not an executable file"},
		{"another's", func(dir string) {
			exe(t, dir, "agentjail-exec", 0o755)
			os.Chown(filepath.Join(dir, "agentjail-exec"), 1234, 1234)
		}, false, "owned by uid 1234, neither root nor agentjail's owner"},
		{"in another's directory", func(dir string) {
			exe(t, dir, "agentjail-exec", 0o755)
			os.Chown(dir, 1234, 1234)
		}, false, "is owned by uid 1234, mode 0755"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			exe(t, dir, "agentjail", 0o755)
			c.setup(dir)
			f, err := sibling(filepath.Join(dir, "agentjail"), "agentjail-exec")
			if f != nil {
				f.Close()
			}
			switch {
			case c.missing:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("got %v, want fs.ErrNotExist", err)
				}
			case c.refused == "":
				if err != nil || f == nil {
					t.Errorf("refused: %v", err)
				}
			case err == nil || !strings.Contains(err.Error(), c.refused) || errors.Is(err, fs.ErrNotExist):
				t.Errorf("got %v, want an error naming %q", err, c.refused)
			}
		})
	}
}

func exe(t *testing.T, dir, name string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommonDirFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "commondir")
	for range 2 {
		if err := CommonDirFile(p); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(p); err != nil || string(data) != ".\n" {
		t.Errorf("%q %v", data, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("%v %v", fi, err)
	}
	for _, bad := range []string{"../evil\n", ".\n\n", ""} {
		os.Chmod(p, 0o644)
		os.WriteFile(p, []byte(bad), 0o644)
		if err := CommonDirFile(p); err == nil {
			t.Errorf("a file holding %q is used", bad)
		}
	}
	os.Remove(p)
	os.Symlink("/etc/hostname", p)
	if err := CommonDirFile(p); err == nil {
		t.Error("a link is followed")
	}
}

func TestGitFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "gitfile")
	for range 2 {
		if err := GitFile(p, "/run/agentjail"); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(p); err != nil || string(data) != "gitdir: /run/agentjail\n" {
		t.Errorf("%q %v", data, err)
	}
	if err := GitFile(p, "/elsewhere"); err == nil {
		t.Error("a file pointing elsewhere is used")
	}
}

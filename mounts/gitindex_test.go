package mounts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestGitlinks: the gitlinks of real indexes, in each version git writes,
// and nothing from what is no index or is cut short.
func TestGitlinks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	sha := "0123456789abcdef0123456789abcdef01234567"
	for _, version := range []string{"2", "3", "4"} {
		dir := t.TempDir()
		git := func(args ...string) {
			t.Helper()
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		os.MkdirAll(filepath.Join(dir, "node_modules/a"), 0o755)
		os.WriteFile(filepath.Join(dir, "node_modules/a/f.js"), nil, 0o644)
		os.WriteFile(filepath.Join(dir, "README"), nil, 0o644)
		git("add", "README", "node_modules/a/f.js")
		git("update-index", "--add", "--cacheinfo", "160000,"+sha+",node_modules/x")
		git("update-index", "--add", "--cacheinfo", "160000,"+sha+",vendor/deep/sub")
		if version == "3" {
			// An entry with extended flags makes git write version 3.
			os.WriteFile(filepath.Join(dir, "new.txt"), nil, 0o644)
			git("add", "-N", "new.txt")
		}
		git("update-index", "--index-version", version)
		data, err := os.ReadFile(filepath.Join(dir, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		got := gitlinks(data)
		if want := []string{"node_modules/x", "vendor/deep/sub"}; !slices.Equal(got, want) {
			t.Errorf("version %s: gitlinks = %q, want %q", version, got, want)
		}
		for cut := range len(data) {
			if len(gitlinks(data[:cut])) > 2 {
				t.Fatalf("version %s cut at %d: more gitlinks than there are", version, cut)
			}
		}
	}
	if gitlinks([]byte("not an index at all")) != nil {
		t.Error("gitlinks of no index")
	}
}

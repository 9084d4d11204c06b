package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/profiles"
)

// tree makes a project-like tree: dirs directories of files files each,
// a .git with hooks at the top and in every tenth directory.
func tree(b *testing.B, root string, dirs, files int) {
	b.Helper()
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("pkg%d/sub%d", d/20, d%20))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", f)), []byte("package x\n"), 0o644)
		}
		if d%10 == 0 {
			os.MkdirAll(filepath.Join(dir, ".git/hooks"), 0o755)
			os.WriteFile(filepath.Join(dir, ".git/config"), []byte("[core]\n"), 0o644)
		}
	}
}

// BenchmarkPostRunChecks: what a run with a writable root adds to find
// violations, on a tree of 2000 directories and 20000 files, against
// find(1) walking the same tree for set-id files (`find ROOT -type f -perm
// /6000`), the cheapest tool doing a full walk: the set-id walk alone (the
// same work as find), and a snapshot of the protected paths (taken once
// before the launch and once after the run, beside the set-id walk).
func BenchmarkPostRunChecks(b *testing.B) {
	root, err := os.MkdirTemp("/var/tmp", "agentjail-bench-tree-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	tree(b, root, 2000, 10)
	p, err := policy.Loader{Builtins: profiles.FS}.Load("tier1")
	if err != nil {
		b.Fatal(err)
	}
	p.Filesystem.Write = []string{root}
	disk := os.DirFS("/").(mounts.Disk)
	find := func() error { return devNull("find", root, "-type", "f", "-perm", "/6000") }
	setID := func() error {
		_, err := hostfs.StripSetID([]string{root}, hostfs.RunClock())
		return err
	}
	snapshot := func() error {
		if s := mounts.TakeSnapshot(disk, p, func(string) bool { return false }); len(s) == 0 {
			return fmt.Errorf("the snapshot found no protected path")
		}
		return nil
	}
	for range b.N {
		compare(b, "set-id walk, 22k entries", samples(30), "find -perm /6000", find, "hostfs.StripSetID", setID)
		compare(b, "protected snapshot, 22k", samples(30), "find -perm /6000", find, "mounts.TakeSnapshot", snapshot)
	}
}

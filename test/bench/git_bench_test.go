package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitTree makes a project whose superproject has n submodules under
// libs/, each with its git directory in .git/modules/libs/mN, its .git
// file, and a few sources: the shape `git submodule add` leaves (the
// files git reads, without objects). n = 0 is the same project with plain
// directories in their place.
func gitTree(b *testing.B, root string, n int) {
	b.Helper()
	files := map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n\tbare = false\n", ".git/hooks/": "", ".git/objects/": "", ".git/refs/": ""}
	for i := range 200 {
		lib := fmt.Sprintf("libs/m%d", i)
		files[lib+"/src/a.go"] = "package a\n"
		if i >= n {
			continue
		}
		gd := ".git/modules/" + lib
		files[gd+"/HEAD"] = "ref: refs/heads/main\n"
		files[gd+"/config"] = "[core]\n\tworktree = ../../../../" + lib + "\n"
		files[gd+"/hooks/"] = ""
		files[gd+"/objects/"], files[gd+"/refs/"] = "", ""
		files[lib+"/.git"] = "gitdir: ../../" + gd + "\n"
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if name[len(name)-1] == '/' {
			os.MkdirAll(p, 0o755)
		} else if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 1000, 1000) })
}

// BenchmarkSubmodules: what protecting the git metadata of 200 submodules
// costs, against the same project without them: `agentjail render`
// (discovery and rendering, process start included) and a launch of
// /bin/true (bwrap makes every mount; each of its binds rereads the mount
// table, so its time grows with the square of their number). Reports the
// number of bwrap arguments of each.
func BenchmarkSubmodules(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: the trees belong to the run user")
	}
	trees := map[int]string{}
	for _, n := range []int{0, 200} {
		root, err := os.MkdirTemp("/var/tmp", "agentjail-bench-git-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(root)
		os.Chmod(root, 0o755)
		gitTree(b, root, n)
		trees[n] = root
		out, err := exec.Command(agentjail, "render", "--json", "--write", root, "--chdir", root, "--", "/bin/true").Output()
		if err != nil {
			b.Fatalf("render: %v", err)
		}
		var plan struct{ Argv []string }
		if err := json.Unmarshal(out, &plan); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(plan.Argv)), fmt.Sprintf("bwrap-args-%d-submodules", n))
		b.Logf("%d submodules: %d bwrap arguments", n, len(plan.Argv))
	}
	step := func(verb string, n int) func() error {
		return func() error {
			return devNull(agentjail, verb, "--write", trees[n], "--chdir", trees[n], "--", "/bin/true")
		}
	}
	for range b.N {
		compare(b, "render, 200 submodules", samples(20), "render, none", step("render", 0), "render, 200", step("render", 200))
		compare(b, "launch, 200 submodules", samples(20), "run, none", step("run", 0), "run, 200", step("run", 200))
	}
}

// BenchmarkLargeIndex: what a repository's index of 100 000 entries costs a
// launch of /bin/true where it is read (a node_modules lies in the work
// tree, so its gitlinks are looked for: mounts' skippedLinks reads it at
// the render and at each snapshot), against the same project without an
// index.
func BenchmarkLargeIndex(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: the trees belong to the run user")
	}
	trees := map[bool]string{}
	for _, index := range []bool{false, true} {
		root, err := os.MkdirTemp("/var/tmp", "agentjail-bench-index-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(root)
		os.Chmod(root, 0o755)
		git := exec.Command("git", "init", "-q", root)
		if out, err := git.CombinedOutput(); err != nil {
			b.Fatalf("git init: %v\n%s", err, out)
		}
		os.MkdirAll(filepath.Join(root, "node_modules/left-pad"), 0o755)
		if index {
			var list strings.Builder
			for i := range 100000 {
				fmt.Fprintf(&list, "100644 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\tsrc/d%d/file%d.js\n", i/100, i)
			}
			git = exec.Command("git", "-C", root, "update-index", "--index-info")
			git.Stdin = strings.NewReader(list.String())
			if out, err := git.CombinedOutput(); err != nil {
				b.Fatalf("git update-index: %v\n%s", err, out)
			}
			st, err := os.Stat(filepath.Join(root, ".git/index"))
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("index: %d bytes", st.Size())
		}
		filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 1000, 1000) })
		trees[index] = root
	}
	run := func(index bool) func() error {
		return func() error {
			return devNull(agentjail, "run", "--write", trees[index], "--chdir", trees[index], "--", "/bin/true")
		}
	}
	for range b.N {
		ref, subj := compare(b, "launch, 100 000-entry index", samples(20), "run, no index", run(false), "run, the index", run(true))
		b.ReportMetric(float64(subj-ref)/1e6, "ms-added")
	}
}

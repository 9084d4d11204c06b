package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentjail/agentjail/policy"
)

// gitTree adds to the fake host a superproject at /srv/proj with every
// kind of git metadata: includes (relative, absolute, conditional, missing,
// from "~/", nested), core.hooksPath and core.fsmonitor in an included
// file, extensions.worktreeConfig, submodules (one named with a "/", one
// deeper than protect_depth holding a submodule of its own, one
// de-initialised), linked worktrees (inside the root and outside it), a
// nested repository deeper than protect_depth, and a bare repository.
func gitTree() fstest.MapFS {
	d := host()
	f := func(p, data string) { d[p] = node(0o644, 1000, 1000, data) }
	for p, data := range map[string]string{
		"srv/proj/.git/config": "[core]\n\tbare = false\n[include]\n\tpath = ../shared.cfg\n" +
			"[includeIf \"gitdir:/nowhere/\"]\n\tpath = /srv/proj/conf/missing.cfg\n" +
			"[include]\n\tpath = ~/op.cfg\n[extensions]\n\tworktreeConfig = true\n",
		"srv/proj/shared.cfg":                                   "[include]\n\tpath = conf/nested.cfg\n[core]\n\thooksPath = tools/hooks\n",
		"srv/proj/conf/nested.cfg":                              "[core]\n\tfsmonitor = ./tools/fsmon.sh\n",
		"srv/proj/tools/fsmon.sh":                               "#!/bin/sh\n",
		"srv/proj/.git/modules/libsub/HEAD":                     "ref: refs/heads/main\n",
		"srv/proj/.git/modules/libsub/config":                   "[core]\n\tworktree = ../../../libsub\n",
		"srv/proj/libsub/.git":                                  "gitdir: ../.git/modules/libsub\n",
		"srv/proj/.git/modules/vendor/lib/HEAD":                 "ref: refs/heads/main\n",
		"srv/proj/.git/modules/vendor/lib/config":               "[core]\n\tworktree = ../../../../vendor/a/b/c/d/lib\n",
		"srv/proj/vendor/a/b/c/d/lib/.git":                      "gitdir: ../../../../../../.git/modules/vendor/lib\n",
		"srv/proj/.git/modules/vendor/lib/modules/inner/HEAD":   "ref: refs/heads/main\n",
		"srv/proj/.git/modules/vendor/lib/modules/inner/config": "[core]\n\tworktree = ../../../../../../vendor/a/b/c/d/lib/inner\n",
		"srv/proj/vendor/a/b/c/d/lib/inner/.git":                "gitdir: ../../../../../../../.git/modules/vendor/lib/modules/inner\n",
		"srv/proj/.git/modules/gone/HEAD":                       "ref: refs/heads/main\n",
		"srv/proj/.git/modules/gone/config":                     "[core]\n\tworktree = ../../../gone\n",
		"srv/proj/.git/worktrees/wt/commondir":                  "../..\n",
		"srv/proj/.git/worktrees/wt/gitdir":                     "/srv/proj/trees/wt/.git\n",
		"srv/proj/.git/worktrees/wt/HEAD":                       "ref: refs/heads/wt\n",
		"srv/proj/trees/wt/.git":                                "gitdir: /srv/proj/.git/worktrees/wt\n",
		"srv/proj/.git/worktrees/out/commondir":                 "../..\n",
		"srv/proj/.git/worktrees/out/gitdir":                    "/srv/elsewhere/out/.git\n",
		"srv/proj/a/b/c/d/e/nested/.git/config":                 "[core]\n",
		"srv/proj/a/b/c/d/e/nested/.git/HEAD":                   "ref: refs/heads/main\n",
		"srv/proj/backup.git/HEAD":                              "ref: refs/heads/main\n",
		"srv/proj/backup.git/config":                            "[core]\n\tbare = true\n",
	} {
		f(p, data)
	}
	for _, p := range []string{"srv/proj/.git/modules/libsub/hooks", "srv/proj/.git/modules/vendor/lib/hooks", "srv/proj/.git/modules/gone/hooks",
		"srv/proj/gone", "srv/proj/tools", "srv/proj/a/b/c/d/e/nested/.git/hooks", "srv/proj/backup.git/objects", "srv/proj/backup.git/refs"} {
		d[p] = dir(0o755, 1000)
	}
	return d
}

// formatProtection lists what findProtected found, one path a line.
func formatProtection(pr protection) string {
	var b strings.Builder
	for _, l := range []struct {
		name string
		list []string
	}{{"pin", pr.pins}, {"read-only", pr.existing}, {"tmpfs", pr.dirs}, {"mask", pr.masks}, {"link", pr.links}, {"commondir", pr.commondirs}, {"watched", pr.watched}} {
		for _, p := range slices.Sorted(slices.Values(l.list)) {
			fmt.Fprintf(&b, "%s %s\n", l.name, p)
		}
	}
	for _, err := range pr.errs {
		fmt.Fprintf(&b, "error %v\n", err)
	}
	return b.String()
}

func gitPolicy(t *testing.T) policy.Policy {
	t.Helper()
	return input(t, "tier1", "/srv/proj").Policy
}

// TestGitMetadataGolden: what is protected in gitTree, and, named here
// so that an -update cannot drop them unseen, the doors of issue 14: the
// worktree's commondir, an include target inside the root, a submodule's
// .git file, and the directories on the way to a nested repository's and a
// submodule's .git.
func TestGitMetadataGolden(t *testing.T) {
	t.Parallel()
	p := gitPolicy(t)
	pr := findProtected(gitTree(), WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, []string{"/home/op", "/srv/proj/home"})
	got := formatProtection(pr)
	golden(t, "git", got)
	for _, want := range []string{
		"read-only /srv/proj/.git/worktrees/wt/commondir",
		"read-only /srv/proj/.git/worktrees/out/commondir",
		"read-only /srv/proj/trees/wt/.git",
		"read-only /srv/proj/shared.cfg",
		"read-only /srv/proj/conf/nested.cfg",
		"mask /srv/proj/conf/missing.cfg",
		"mask /srv/proj/home", // ~/op.cfg with a home under the root
		"mask /srv/proj/tools/hooks",
		"read-only /srv/proj/tools/fsmon.sh",
		"mask /srv/proj/.git/config.worktree",
		"read-only /srv/proj/libsub/.git",
		"pin /srv/proj/libsub",
		"read-only /srv/proj/.git/modules/vendor/lib/config",
		"read-only /srv/proj/vendor/a/b/c/d/lib/.git",
		"read-only /srv/proj/vendor/a/b/c/d/lib/inner/.git",
		"read-only /srv/proj/.git/modules/vendor/lib/modules/inner/config",
		"pin /srv/proj/vendor/a/b/c/d/lib",
		"watched /srv/proj/gone/.git", // an empty .git would break git there
		"pin /srv/proj/a/b/c/d/e/nested",
		"pin /srv/proj/a/b/c/d/e/nested/.git",
		"read-only /srv/proj/a/b/c/d/e/nested/.git/config",
		"read-only /srv/proj/backup.git/config",
		"commondir /srv/proj/.git/commondir", // masked with ".\n": git dies on an empty one
		"commondir /srv/proj/.git/modules/libsub/commondir",
		"commondir /srv/proj/.git/modules/vendor/lib/modules/inner/commondir",
		"watched /srv/proj/.git/modules/libsub/config.worktree",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the protection lacks %q", want)
		}
	}
	for _, bad := range []string{"/srv/elsewhere", "/home/op", "/srv/proj/backup.git/.git", "/srv/proj/.git/modules/libsub/.git"} {
		if strings.Contains(got, " "+bad+"\n") || strings.Contains(got, " "+bad+"/") {
			t.Errorf("the protection names %s:\n%s", bad, got)
		}
	}

	// Without .git/config and .git/hooks among the patterns, git is not
	// searched.
	pr = findProtected(gitTree(), WritableRoots(p), []string{".env"}, 3, nil)
	if s := formatProtection(pr); strings.Contains(s, ".git") {
		t.Errorf("git protected without a .git pattern:\n%s", s)
	}
}

// TestGitMetadataHostile: what git files name is followed as the kernel
// would and no further: a symlink met under the root is a link (refused by
// Render unless accepted), an include loop ends, a file too large is an
// error, a FIFO or a directory where a file should be is not read.
func TestGitMetadataHostile(t *testing.T) {
	t.Parallel()
	p := gitPolicy(t)
	find := func(d fstest.MapFS) protection {
		return findProtected(d, WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, nil)
	}

	d := gitTree()
	d["srv/proj/.git/config"] = node(0o644, 1000, 1000, "[include]\n\tpath = ../lnk/../x.cfg\n\tpath = ../loop.cfg\n\tpath = ../fifo\n\tpath = ../adir\n")
	d["srv/proj/lnk"] = link("a/b/c") // lnk/.. is a/b, not the root
	d["srv/proj/a/b/x.cfg"] = node(0o644, 1000, 1000, "[core]\n\thooksPath = /srv/proj/via-link\n")
	d["srv/proj/loop.cfg"] = node(0o644, 1000, 1000, "[include]\n\tpath = loop.cfg\n")
	d["srv/proj/fifo"] = node(fs.ModeNamedPipe|0o644, 1000, 1000, "[core]\n\thooksPath = /srv/proj/from-fifo\n")
	d["srv/proj/adir"] = dir(0o755, 1000)
	got := formatProtection(find(d))
	for _, want := range []string{"link /srv/proj/lnk", "read-only /srv/proj/a/b/x.cfg", "mask /srv/proj/via-link", "read-only /srv/proj/loop.cfg", "read-only /srv/proj/fifo"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the protection lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "from-fifo") {
		t.Errorf("a FIFO was read as a config file:\n%s", got)
	}

	d = gitTree()
	d["srv/proj/shared.cfg"] = node(0o644, 1000, 1000, strings.Repeat("#", maxGitFile+1))
	pr := find(d)
	if len(pr.errs) != 1 || !errors.Is(pr.errs[0], ErrGitFile) || !strings.Contains(pr.errs[0].Error(), "/srv/proj/shared.cfg holds 1048577 bytes") {
		t.Errorf("errors %v, want one naming the large include", pr.errs)
	}
	in := input(t, "tier1", "/srv/proj")
	in.Disk = d
	if _, err := Render(in); !errors.Is(err, ErrGitFile) {
		t.Errorf("Render = %v, want ErrGitFile", err)
	}

	// core.fsmonitor: a boolean, a name looked up in PATH and a shell
	// command line name no file of the root.
	d = gitTree()
	d["srv/proj/conf/nested.cfg"] = node(0o644, 1000, 1000, "[core]\n\tfsmonitor = true\n\tfsmonitor = watchman\n\tfsmonitor = \"./tools/fsmon.sh --x\"\n")
	if got := formatProtection(find(d)); strings.Contains(got, "fsmon") || strings.Contains(got, "watchman") || strings.Contains(got, "/srv/proj/true") {
		t.Errorf("a core.fsmonitor that names no path was protected:\n%s", got)
	}

	// A submodule's .git file naming a git directory that does not exist
	// under the root: it is made uncreatable.
	d = gitTree()
	d["srv/proj/libsub/.git"] = node(0o644, 1000, 1000, "gitdir: ../.git/modules/renamed\n")
	if got := formatProtection(find(d)); !strings.Contains(got, "mask /srv/proj/.git/modules/renamed\n") {
		t.Errorf("a missing git directory is not masked:\n%s", got)
	}
	// A bare repository whose objects and refs are links (git asks only
	// access(2) of them, which follows links), with a work tree of its own
	// and an fsmonitor command: its config and hooks are protected.
	d = gitTree()
	d["srv/proj/src/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
	d["srv/proj/src/config"] = node(0o644, 1000, 1000, "[core]\n\tworktree = .\n\tfsmonitor = ./fsmon\n")
	d["srv/proj/src/objects"], d["srv/proj/src/refs"] = link(".cache/o"), link(".cache/r")
	d["srv/proj/src/.cache/o"], d["srv/proj/src/.cache/r"] = dir(0o755, 1000), dir(0o755, 1000)
	got = formatProtection(find(d))
	for _, want := range []string{"read-only /srv/proj/src/config", "mask /srv/proj/src/hooks", "mask /srv/proj/src/fsmon"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("a bare repository with linked objects and refs: the protection lacks %q:\n%s", want, got)
		}
	}
	// Empty files HEAD, objects and refs make a directory a git
	// directory, and no more: what else it holds is searched all the
	// same (a nested clone's config below it was left unprotected).
	d = gitTree()
	for _, n := range []string{"HEAD", "objects", "refs"} {
		d["srv/proj/pkg/"+n] = node(0o644, 1000, 1000, "")
	}
	d["srv/proj/pkg/lib/.git/config"] = node(0o644, 1000, 1000, "[core]\n")
	d["srv/proj/pkg/lib/.git/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
	if got = formatProtection(find(d)); !strings.Contains(got, "read-only /srv/proj/pkg/lib/.git/config\n") {
		t.Errorf("a repository below a directory with HEAD, objects and refs is not protected:\n%s", got)
	}
	// HEAD and a commondir naming where objects and refs are: a git
	// directory too (git looks for them in the common directory).
	d = gitTree()
	d["srv/proj/src/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
	d["srv/proj/src/commondir"] = node(0o644, 1000, 1000, "../store\n")
	d["srv/proj/store/config"] = node(0o644, 1000, 1000, "[core]\n\tpager = ./x\n")
	d["srv/proj/store/objects"], d["srv/proj/store/refs"] = dir(0o755, 1000), dir(0o755, 1000)
	got = formatProtection(find(d))
	for _, want := range []string{"read-only /srv/proj/src/commondir", "read-only /srv/proj/store/config", "mask /srv/proj/store/hooks"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("HEAD and a commondir: the protection lacks %q:\n%s", want, got)
		}
	}
	// A .git that is a link, under the root: refused unless accepted.
	d = gitTree()
	d["srv/proj/libsub/.git"] = link("../.git/modules/libsub")
	in.Disk = d
	if _, err := Render(in); !errors.Is(err, ErrProtectedLink) || !strings.Contains(err.Error(), "/srv/proj/libsub/.git -> /srv/proj/.git/modules/libsub") {
		t.Errorf("Render = %v, want ErrProtectedLink naming libsub/.git", err)
	}
}

// TestRenderRefusesTooManyArguments: bubblewrap stops at 9000 arguments
// ("Exceeded maximum number of arguments"); a plan past that is refused
// with the cause and the fix.
func TestRenderRefusesTooManyArguments(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/libs"], d["srv/proj/.git/modules"] = dir(0o755, 1000), dir(0o755, 1000)
	for i := range 700 { // 5 mounts each
		name := fmt.Sprintf("m%d", i)
		d["srv/proj/.git/modules/"+name] = dir(0o755, 1000)
		d["srv/proj/libs/"+name] = dir(0o755, 1000)
		d["srv/proj/.git/modules/"+name+"/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
		d["srv/proj/.git/modules/"+name+"/config"] = node(0o644, 1000, 1000, "[core]\n\tworktree = ../../../libs/"+name+"\n")
		d["srv/proj/.git/modules/"+name+"/hooks"] = dir(0o755, 1000)
		d["srv/proj/libs/"+name+"/.git"] = node(0o644, 1000, 1000, "gitdir: ../../.git/modules/"+name+"\n")
	}
	_, err := Render(in)
	if !errors.Is(err, ErrTooManyArgs) || !strings.Contains(err.Error(), "where bubblewrap takes 9000; ") || !strings.HasSuffix(err.Error(), "pass narrower writable roots") {
		t.Fatalf("Render = %v, want ErrTooManyArgs", err)
	}

	// Files a run's agent planted by the thousand in one directory, which
	// made every later run refuse, pointing at the roots: they are named.
	in = input(t, "tier1", "/srv/proj")
	d = in.Disk.(fstest.MapFS)
	for i := range 5000 {
		d[fmt.Sprintf("srv/proj/.env.%d", i)] = node(0o644, 1000, 1000, "")
	}
	if _, err := Render(in); !errors.Is(err, ErrTooManyArgs) || !strings.Contains(err.Error(), "of them are in /srv/proj (.env, .env.0, .env.1, …): remove those that should not be there (a run's agent may have made them)") {
		t.Fatalf("Render = %v, want the crowded directory named", err)
	}
}

// TestGitMetadataEnclosingRepository: a writable root inside a work tree
// (--write proj/vendor): the repository's git directory is outside the
// root, read-only anyway, but its submodules' work trees inside the root
// are protected as they would be from the top.
func TestGitMetadataEnclosingRepository(t *testing.T) {
	t.Parallel()
	p := gitPolicy(t)
	got := formatProtection(findProtected(gitTree(), []string{"/srv/proj/vendor"}, p.Filesystem.Protect, 3, nil))
	for _, want := range []string{"read-only /srv/proj/vendor/a/b/c/d/lib/.git", "read-only /srv/proj/vendor/a/b/c/d/lib/inner/.git", "pin /srv/proj/vendor/a/b/c/d/lib"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the protection lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "/srv/proj/.git") || strings.Contains(got, "pin /srv/proj/vendor\n") {
		t.Errorf("the protection names a path outside the root, or the root:\n%s", got)
	}
}

// TestRenderRefusesARootInAProtectedPath: a writable root inside what the
// protection of another keeps read-only (a repository's hooks, a
// protected directory) would stay read-only, the agent's writes failing
// unexplained: refused, naming both.
func TestRenderRefusesARootInAProtectedPath(t *testing.T) {
	t.Parallel()
	for _, nested := range []string{"/srv/proj/.git/modules/libsub/hooks", "/srv/proj/tools/hooks/sub"} {
		in := input(t, "tier1", "/srv/proj")
		d := gitTree()
		for _, p := range []string{"srv/proj/.git", "srv/proj/.git/modules", "srv/proj/.git/modules/libsub", "srv/proj/tools/hooks", "srv/proj/tools/hooks/sub"} {
			d[p] = dir(0o755, 1000)
		}
		in.Disk = d
		in.Policy.Filesystem.Write = append(in.Policy.Filesystem.Write, nested)
		_, err := Render(in)
		if err == nil || !strings.Contains(err.Error(), "filesystem.write[1]: writable root "+nested+" is a path agentjail protects in the writable root /srv/proj") && !strings.Contains(err.Error(), "filesystem.write[1]: writable root "+nested+" lies in ") || !strings.Contains(err.Error(), "in the writable root /srv/proj (") || !strings.Contains(err.Error(), "it would stay read-only") {
			t.Errorf("--write %s: Render = %v", nested, err)
		}
	}
	// Beside the protected paths, not in them: taken.
	in := input(t, "tier1", "/srv/proj")
	in.Disk = gitTree()
	in.Policy.Filesystem.Write = append(in.Policy.Filesystem.Write, "/srv/proj/tools")
	if _, err := Render(in); err != nil {
		t.Errorf("--write /srv/proj/tools: %v", err)
	}
}

// TestIsGitDir holds IsGitDir to git's is_git_directory in every
// environment an operator's git may run in: with GIT_OBJECT_DIRECTORY set,
// git takes a directory without objects.
func TestIsGitDir(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		names []string
		want  bool
	}{
		{[]string{"HEAD", "objects", "refs"}, true},
		{[]string{"HEAD", "refs"}, true}, // GIT_OBJECT_DIRECTORY=…
		{[]string{"HEAD", "commondir"}, true},
		{[]string{"HEAD", "objects"}, false},
		{[]string{"objects", "refs"}, false},
		{[]string{"HEAD"}, false},
	} {
		if got := bare(c.names); got != c.want {
			t.Errorf("IsGitDir(%v) = %v, want %v", c.names, got, c.want)
		}
	}
}

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// project makes a workspace with the secrets tier profiles re-protect, at
// the root and one and two directories down.
func project(t *testing.T) string {
	t.Helper()
	p := workspace(t)
	files := map[string]string{"README": "hello\n"}
	for _, d := range []string{"", "sub/", "sub/deeper/"} {
		files[d+".env"] = "API_KEY=secret-" + d + "\n"
		files[d+".git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
		files[d+".git/config"] = "[core]\n\tbare = false\n"
	}
	write(t, p, files)
	return p
}

func TestWritableRootIsWritable(t *testing.T) {
	jailed(t)
	p := project(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", "echo made > out.txt && mkdir -p new/dir && echo deep > new/dir/f")
	wantCode(t, r, 0)
	data, err := os.ReadFile(filepath.Join(p, "new/dir/f"))
	if err != nil || string(data) != "deep\n" {
		t.Fatalf("write through the writable root did not land: %q, %v", data, err)
	}
	fi, _ := os.Stat(filepath.Join(p, "out.txt"))
	if uid := ownerOf(fi); uid != runUID {
		t.Errorf("out.txt is owned by %d, want the run user %d", uid, runUID)
	}
}

func TestSecretsAreReprotectedAtEveryDepth(t *testing.T) {
	jailed(t)
	p := project(t)
	before := treeHash(t, p)
	var script strings.Builder
	for _, d := range []string{".", "sub", "sub/deeper"} {
		for _, f := range []string{".env", ".git/hooks/pre-commit", ".git/config"} {
			path := d + "/" + f
			fmt.Fprintf(&script, "echo pwned >> %s && echo WROTE %s\n", path, path)
			fmt.Fprintf(&script, "rm -f %s && echo REMOVED %s\n", path, path)
			fmt.Fprintf(&script, "mv %s %s.moved && echo MOVED %s\n", path, path, path)
			fmt.Fprintf(&script, "chmod 777 %s && echo CHMOD %s\n", path, path)
		}
		fmt.Fprintf(&script, "echo new > %s/.git/hooks/post-checkout && echo PLANTED %s\n", d, d)
	}
	script.WriteString("true\n")
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", script.String())
	wantCode(t, r, 0)
	for _, word := range []string{"WROTE", "REMOVED", "MOVED", "CHMOD", "PLANTED"} {
		if strings.Contains(r.stdout, word) {
			t.Errorf("a protected path was changed inside the jail:\n%s", r.stdout)
			break
		}
	}
	if after := treeHash(t, p); after != before {
		t.Errorf("the project changed on the host (hash %s -> %s)", before, after)
	}
}

// TestMissingProtectedPathCannotBeCreated: a missing protected path cannot
// be made; a missing .claude, which would hold some, is a directory of the
// run's own (a tmpfs, which cannot be moved aside) in which they are
// masks, and what else is written there never reaches the host.
func TestMissingProtectedPathCannotBeCreated(t *testing.T) {
	jailed(t)
	p := workspace(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", `
		echo '{"mcpServers":{}}' > .mcp.json && echo CREATED .mcp.json
		mkdir -p .claude/commands && echo CREATED .claude/commands
		echo '{}' > .claude/settings.json && echo CREATED .claude/settings.json
		mv .claude .claude.aside && echo MOVED .claude
		echo note > .claude/notes.md && test -d .claude && echo SCRATCH .claude
		git_dir=.git; mkdir -p $git_dir/hooks && echo CREATED .git
		echo x > .env && echo CREATED .env
		echo ok > allowed.txt`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "CREATED") || strings.Contains(r.stdout, "MOVED") || !strings.Contains(r.stdout, "SCRATCH .claude") {
		t.Errorf("a missing protected path was created, or .claude moved, or it is no directory of the run's own:\n%s", r.stdout)
	}
	entries, _ := os.ReadDir(p)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "allowed.txt" {
		t.Errorf("the host holds %v after the run, want only allowed.txt (no placeholders left)", names)
	}
}

// TestPlaceholdersStayOutOfGit: the masks of missing protected paths are
// files (and directories) in the jail's work tree; git listed them as
// untracked and an agent's `git add -A && git commit` committed them, a
// commit of empty .env, .npmrc, .claude/settings.json..., whose files were
// gone after the run. Now git's default excludes file in the private home
// lists them, anchored at every directory above each (the agent may also
// `git init` in a subdirectory), and the agent's own files are committed.
func TestPlaceholdersStayOutOfGit(t *testing.T) {
	jailed(t)
	home, p := workspace(t), workspace(t)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "start"}} {
		if out, err := operatorGit(t, home, p, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", `
		export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org
		mkdir -p sub && echo mine > sub/made.txt && echo mine > made.txt
		git add -A && git commit -qm agent && git show --stat --format= HEAD | sed 's/^ */committed=/;s/ *|.*//'
		echo "untracked=$(git status --porcelain | tr '\n' ' ')"
		cd sub && git init -q . && git add -A && echo "sub=$(git diff --cached --name-only | tr '\n' ' ')"`)
	wantCode(t, r, 123) // sub's new repository, moved aside after the run
	var committed []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if c, ok := strings.CutPrefix(l, "committed="); ok && !strings.Contains(c, "changed") {
			committed = append(committed, c)
		}
	}
	slices.Sort(committed)
	if strings.Join(committed, ",") != "made.txt,sub/made.txt" || !strings.Contains(r.stdout, "untracked=\n") || !strings.Contains(r.stdout, "sub=made.txt \n") {
		t.Errorf("the agent's commit holds %q, want only its two files; or placeholders show:\n%s%s", committed, r.stdout, r.stderr)
	}
	if out, err := operatorGit(t, home, p, "status", "--porcelain"); err != nil || !strings.HasPrefix(out, "?? sub/.git.agentjail-quarantine-") || strings.Count(out, "\n") != 1 {
		t.Errorf("after the run the operator's git status says %q (%v), want only the agent's new repository, moved aside", out, err)
	}
}

func TestSymlinkOutOfWritableRootCannotBeWrittenThrough(t *testing.T) {
	jailed(t)
	p := workspace(t)
	// Writable by the run user on the host and visible in the jail (not
	// under its tmpfs /tmp), but not a writable root.
	outside := visibleDir(t)
	write(t, outside, map[string]string{"victim": "original\n"})
	if err := os.Symlink(outside, filepath.Join(p, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "victim"), filepath.Join(p, "victim-link")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, outside)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c",
		"echo pwned > escape/victim; echo pwned > victim-link; echo new > escape/new; true")
	wantCode(t, r, 0)
	if after := treeHash(t, outside); after != before {
		t.Errorf("a symlink let the agent write outside its writable root")
	}
	if !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("writes were not refused as read-only:\n%s", r.stderr)
	}
}

func TestSystemDirectoriesAreReadOnly(t *testing.T) {
	jailed(t)
	r := aj(t, "run", "--", "sh", "-c", "for d in /etc /usr /usr/bin /var/lib /; do touch $d/agentjail-probe 2>/dev/null && echo WROTE $d; done; true")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("system directories are writable:\n%s", r.stdout)
	}
	for _, d := range []string{"/etc", "/usr", "/usr/bin", "/var/lib", "/"} {
		if _, err := os.Lstat(filepath.Join(d, "agentjail-probe")); err == nil {
			t.Errorf("%s/agentjail-probe exists on the host", d)
		}
	}
}

func TestTmpIsCappedAndPrivate(t *testing.T) {
	jailed(t)
	dir := workspace(t)
	profile := filepath.Join(dir, "small-tmp.yaml")
	write(t, dir, map[string]string{"small-tmp.yaml": "extends: tier1\nfilesystem:\n  tmpfs:\n    /tmp: {size: 1MiB, mode: \"1777\"}\n"})
	marker := fmt.Sprintf("agentjail-it-big-%d", time.Now().UnixNano())
	r := aj(t, "run", "--profile", profile, "--", "sh", "-c",
		"dd if=/dev/zero of=/tmp/"+marker+" bs=64k count=64 2>&1; echo dd=$?")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "No space left on device") || strings.Contains(r.stdout, "dd=0") {
		t.Errorf("writing 4 MiB into a 1 MiB /tmp did not fail with ENOSPC:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join("/tmp", marker)); err == nil {
		t.Errorf("the jail's /tmp write reached the host")
	}
}

func TestHomeSecretsAreHidden(t *testing.T) {
	jailed(t)
	// The invoking user's home ($HOME) holds credentials tier1 denies, in
	// a directory the jail shows (not under its own /tmp), and a file it
	// does not deny: the control that the home is in sight at all.
	home := visibleDir(t)
	write(t, home, map[string]string{
		".ssh/id_ed25519":  "PRIVATE KEY\n",
		".aws/credentials": "aws_secret_access_key=x\n",
		".kube/config":     "token: x\n",
		".gnupg/x":         "x\n",
		"notes.txt":        "not a secret\n",
	})
	inv := invocation{env: []string{"HOME=" + home}}
	r := inv.run(t, "run", "--", "sh", "-c", fmt.Sprintf(`
		cat %[1]s/notes.txt
		for f in .ssh/id_ed25519 .aws/credentials .kube/config .gnupg/x; do
			cat %[1]s/$f 2>/dev/null && echo "READ $f"
		done
		ls -A %[1]s/.ssh | grep . && echo "LISTED .ssh"
		true`, home))
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "not a secret") {
		t.Fatalf("control: the home is out of the jail's sight, so the test proves nothing:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "READ") || strings.Contains(r.stdout, "LISTED") {
		t.Errorf("home secrets are visible in the jail:\n%s", r.stdout)
	}
	// The agent's own home is private and writable.
	r = aj(t, "run", "--", "sh", "-c", `echo x > "$HOME/f" && test "$(stat -c %u "$HOME")" = "$(id -u)" && echo HOME-OK`)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "HOME-OK") {
		t.Errorf("the private home is not writable by the agent:\n%s%s", r.stdout, r.stderr)
	}
}

// TestSymlinkedProtectedPaths: a mount cannot cover a symlink, so with
// .git/hooks -> ../.githooks or .env -> .env.real the agent could remove
// the link and plant a real hooks directory or .env. Such a run is refused
// before anything runs, naming the link, its target and the fixes; with
// accept_protected_symlinks it runs, the target stays read-only, and
// replacing the link ends the run with reason violation (exit 123), the
// planted hook listed and left in place.
func TestSymlinkedProtectedPaths(t *testing.T) {
	jailed(t)
	repo := func(t *testing.T) string {
		p := workspace(t)
		write(t, p, map[string]string{
			".githooks/pre-commit": "#!/bin/sh\nexit 0\n",
			".git/config":          "[core]\n",
			".env.real":            "API_KEY=secret\n",
		})
		for link, target := range map[string]string{".git/hooks": "../.githooks", ".env": ".env.real"} {
			if err := os.Symlink(target, filepath.Join(p, link)); err != nil {
				t.Fatal(err)
			}
			os.Lchown(filepath.Join(p, link), runUID, runUID)
		}
		return p
	}

	t.Run("refused by default", func(t *testing.T) {
		t.Parallel()
		p := repo(t)
		before := treeHash(t, p)
		r := aj(t, "run", "--write", p, "--chdir", p, "--", "touch", "ran")
		wantCode(t, r, 125)
		for _, want := range []string{
			"symlinked protected path: " + filepath.Join(p, ".git/hooks") + " -> " + filepath.Join(p, ".githooks"),
			"git config core.hooksPath " + filepath.Join(p, ".githooks"),
			"symlinked protected path: " + filepath.Join(p, ".env") + " -> " + filepath.Join(p, ".env.real"),
			"accept_protected_symlinks: true",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if fileExists(filepath.Join(p, "ran")) || treeHash(t, p) != before {
			t.Error("the command ran, or the workspace changed")
		}
	})

	t.Run("accepted, replacing the link is a violation", func(t *testing.T) {
		t.Parallel()
		p := repo(t)
		dir := visibleDir(t)
		profile := filepath.Join(dir, "links.yaml")
		write(t, dir, map[string]string{"links.yaml": "extends: tier1\nfilesystem:\n  accept_protected_symlinks: true\n"})
		rec := filepath.Join(t.TempDir(), "record.json")
		r := aj(t, "run", "--profile", profile, "--record", rec, "--write", p, "--chdir", p, "--", "sh", "-c", `
			echo evil >> .githooks/pre-commit && echo WROTE-TARGET
			echo API_KEY=stolen >> .env.real && echo WROTE-ENV
			rm .git/hooks && mkdir .git/hooks && echo evil > .git/hooks/pre-commit && echo PLANTED
			true`)
		wantCode(t, r, 123)
		if strings.Contains(r.stdout, "WROTE") || !strings.Contains(r.stdout, "PLANTED") {
			t.Errorf("the targets were writable, or the link could not be replaced (the test proves nothing):\n%s%s", r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "agentjail: warning: protected path "+filepath.Join(p, ".git/hooks")+" is a symlink") {
			t.Errorf("no warning for the accepted link:\n%s", r.stderr)
		}
		got := readRecord(t, rec, 123)
		var all []string
		for _, v := range got.Violations {
			all = append(all, v.What+": "+v.Detail)
		}
		if got.Reason != "violation" || !strings.Contains(strings.Join(all, "\n"), "protected: "+filepath.Join(p, ".git/hooks")+" was replaced") {
			t.Errorf("reason %s, violations:\n%s", got.Reason, strings.Join(all, "\n"))
		}
		if data, _ := os.ReadFile(filepath.Join(p, ".git/hooks/pre-commit")); string(data) != "evil\n" {
			t.Errorf("the planted hook was restored silently: %q", data)
		}
		if data, _ := os.ReadFile(filepath.Join(p, ".githooks/pre-commit")); string(data) != "#!/bin/sh\nexit 0\n" {
			t.Errorf("the link's target changed: %q", data)
		}
	})
}

// TestMissingProtectedPathsAtDepth: below the top of a writable root,
// what is missing inside a protected directory that exists cannot be
// created (a nested repository's hooks and config, a .claude's settings);
// another protected name that appears at depth is a violation (exit 123).
// No placeholder is left on the host either way.
func TestMissingProtectedPathsAtDepth(t *testing.T) {
	jailed(t)
	p := workspace(t)
	write(t, p, map[string]string{"sub/.git/HEAD": "ref: refs/heads/main\n", "sub/.claude/": "", "other/": ""})
	before := treeHash(t, p)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", `
		mkdir -p sub/.git/hooks && echo evil > sub/.git/hooks/pre-commit && echo CREATED hooks
		echo '[core]' > sub/.git/config && echo CREATED config
		echo '{}' > sub/.claude/settings.json && echo CREATED settings
		mkdir sub/.claude/commands && echo CREATED commands
		true`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "CREATED") {
		t.Errorf("a missing protected path inside an existing protected directory was created:\n%s", r.stdout)
	}
	if after := treeHash(t, p); after != before {
		t.Errorf("the workspace changed on the host (placeholders left?): sub/.git holds %s", entries(t, filepath.Join(p, "sub/.git")))
	}

	rec := filepath.Join(t.TempDir(), "record.json")
	r = aj(t, "run", "--write", p, "--chdir", p, "--record", rec, "--", "sh", "-c", "echo KEY=x > other/.env")
	wantCode(t, r, 123)
	if got := readRecord(t, rec, 123); got.Reason != "violation" || len(got.Violations) != 1 || !strings.Contains(got.Violations[0].Detail, filepath.Join(p, "other/.env")+" appeared") {
		t.Errorf("a protected name made at depth: reason %s, violations %+v", got.Reason, got.Violations)
	}

	// A git worktree's .git is a file: nothing can be masked below it
	// (bwrap cannot make a mount point there), and the run works.
	wt := workspace(t)
	write(t, wt, map[string]string{".git": "gitdir: " + filepath.Join(p, "sub/.git") + "\n"})
	r = aj(t, "run", "--write", wt, "--chdir", wt, "--", "true")
	wantCode(t, r, 0)
	if got := entries(t, wt); got != ".git" {
		t.Errorf("the worktree holds %q after the run", got)
	}
}

// TestWritableRootsAndTmpfsUnderTmp: the jail's /tmp is a tmpfs of its own,
// yet a writable root under the host's /tmp is there, writable, and what
// the agent writes reaches the host; nothing else of the host's /tmp is.
// A tmpfs a profile puts inside a writable root is mounted over it (after
// the root's bind): what the agent writes there stays in the jail.
func TestWritableRootsAndTmpfsUnderTmp(t *testing.T) {
	jailed(t)
	ws := workspace(t) // under /tmp
	if !strings.HasPrefix(ws, "/tmp/") {
		t.Fatalf("the workspace %s is not under /tmp: the test proves nothing", ws)
	}
	sibling := filepath.Join(filepath.Dir(ws), "sibling")
	if err := os.WriteFile(sibling, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, ws, map[string]string{"cache/": ""})
	chownR(t, ws, runUID)
	dir := visibleDir(t)
	write(t, dir, map[string]string{"p.yaml": "extends: tier1\nfilesystem:\n  tmpfs:\n    \"" + ws + "/cache\": {size: 1MiB, mode: \"0777\"}\n"})
	r := aj(t, "run", "--profile", filepath.Join(dir, "p.yaml"), "--write", ws, "--chdir", ws, "--", "sh", "-c",
		`echo out > made && echo in-cache > cache/c && stat -f -c %T cache; cat `+sibling+` 2>/dev/null || echo no-sibling`)
	wantCode(t, r, 0)
	if r.stdout != "tmpfs\nno-sibling\n" {
		t.Errorf("stdout %q, want the cache a tmpfs and the host's /tmp hidden", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "out\n" {
		t.Errorf("the file the agent made in the writable root under /tmp: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "cache/c")); err == nil {
		t.Error("what the agent wrote into the tmpfs reached the host")
	}
}

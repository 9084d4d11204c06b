package integration

// The git metadata item of the escapes suite (see escapes_test.go; issue
// 14, item 3).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// operatorGit runs git on the host as the operator, who owns the project
// (the run user's uid: git refuses a repository of another owner,
// safe.directory), with a home of its own and no system configuration.
func operatorGit(t *testing.T, home, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "LANG=C",
		"GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@example.org", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.org"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: uid1000}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitProject makes, as the operator, a project with each kind of git
// metadata issue 14 names: a linked worktree (wt), an include
// (../shared.cfg, inside the root), a submodule (libsub), a nested
// repository (nested); and what git also reads configuration from or
// runs: an include that is missing (../missing.cfg: git skips it), two
// includeIf targets (onbranch:main, which applies now, and onbranch:other,
// which does not), core.hooksPath (.githooks), config.worktree
// (extensions.worktreeConfig: .git/config.worktree exists, wt's is
// missing), and a submodule deeper than the profiles' protect_depth (3):
// d1/d2/d3/d4/libdeep. It returns the project and the operator's home.
func gitProject(t *testing.T) (string, string) {
	t.Helper()
	home, src, p := workspace(t), workspace(t), workspace(t)
	must := func(dir string, args ...string) {
		t.Helper()
		if out, err := operatorGit(t, home, dir, args...); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	commit := func(dir string) {
		t.Helper()
		must(dir, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Join(dir, "README"), runUID, runUID)
		must(dir, "add", "README")
		must(dir, "commit", "-q", "-m", "first")
	}
	commit(src)
	commit(p)
	must(p, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "libsub")
	must(p, "commit", "-q", "-m", "libsub")
	must(p, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "d1/d2/d3/d4/libdeep")
	must(p, "commit", "-q", "-m", "libdeep")
	must(p, "worktree", "add", "-q", "-b", "wt", "wt")
	nested := filepath.Join(p, "nested")
	os.Mkdir(nested, 0o755)
	os.Lchown(nested, runUID, runUID)
	commit(nested)
	harmless := "[color]\n\tui = auto\n"
	write(t, p, map[string]string{"shared.cfg": harmless, "ifbranch.cfg": harmless, "ifother.cfg": harmless, ".githooks/pre-commit": "#!/bin/sh\nexit 0\n"})
	must(p, "config", "include.path", "../shared.cfg")
	must(p, "config", "--add", "include.path", "../missing.cfg")
	must(p, "config", "includeIf.onbranch:main.path", "../ifbranch.cfg")
	must(p, "config", "includeIf.onbranch:other.path", "../ifother.cfg")
	must(p, "config", "core.hooksPath", ".githooks")
	must(p, "config", "extensions.worktreeConfig", "true")
	must(p, "config", "--worktree", "color.ui", "auto")
	return p, home
}

// oldBinds are the binds plain bwrap is given to stand for what agentjail
// protected before issue 14: the .git directories of the project and of
// its nested repository pinned, their config and hooks read-only, and
// libsub's (within protect_depth).
func oldBinds(p string) []string {
	binds := []string{"--bind", p, p, "--chdir", p}
	for _, d := range []string{"", "nested/"} {
		binds = append(binds, "--bind", filepath.Join(p, d, ".git"), filepath.Join(p, d, ".git"))
		for _, f := range []string{".git/hooks", ".git/config"} {
			binds = append(binds, "--ro-bind", filepath.Join(p, d, f), filepath.Join(p, d, f))
		}
	}
	for _, f := range []string{".git/modules/libsub/hooks", ".git/modules/libsub/config"} {
		binds = append(binds, "--ro-bind", filepath.Join(p, f), filepath.Join(p, f))
	}
	return binds
}

// gitMetadata hashes what git reads in a gitProject.
func gitMetadata(t *testing.T, p string) string {
	t.Helper()
	h := ""
	for _, f := range []string{".git", "nested/.git", "libsub", "wt", "d1", ".githooks", "shared.cfg", "ifbranch.cfg", "ifother.cfg"} {
		h += treeHash(t, filepath.Join(p, f))
	}
	if fileExists(filepath.Join(p, "missing.cfg")) {
		h += "missing.cfg"
	}
	return h
}

// TestEscapeGitMetadata: git reads configuration from more than
// .git/config, and a core.fsmonitor command there runs as the operator at
// the next `git status` on the host. Each of the four ways of issue 14
// plants one past what agentjail protected before (.git/config and
// .git/hooks read-only, the .git inside them pinned; plain bwrap is given
// the same): a linked worktree's commondir pointed at a config of the
// agent's, an included file inside the root edited, a submodule's .git
// file pointed at a git directory of the agent's, a nested repository
// moved aside for one of the agent's, and (found by the review after) a
// commondir written where none was, in the repository's .git or a
// submodule's git directory, naming a common directory of the agent's.
// Then what the review of the landed tree found untested end to end: an
// includeIf target (one whose condition applies now, and one whose
// condition the agent makes apply by switching the branch), a missing
// include created, a hook planted in core.hooksPath's directory (git status
// runs post-index-change when it rewrites the index), config.worktree
// (edited where it exists, created in a linked worktree where it does
// not), and a submodule below protect_depth (its config, its .git file).
// Under agentjail each fails, also
// from the agent's own user and mount namespace (its copies of the mounts
// are locked): the run exits 0, the repository is unchanged, and the
// operator's git status runs nothing of the agent's.
func TestEscapeGitMetadata(t *testing.T) {
	jailed(t)
	payload := func(marker string) string {
		return fmt.Sprintf("[core]\n\tfsmonitor = \"touch %s; false\"\nEOF\n", marker)
	}
	// gitdir makes a git directory of the agent's at $1, with the payload.
	const gitdir = `gitdir() { mkdir -p "$1" && cp -r .git/objects .git/refs "$1"/ && echo 'ref: refs/heads/main' > "$1"/HEAD && cat > "$1"/config; }
`
	for _, c := range []struct {
		name, where string // where the operator runs git status
		script      string // %[1]s: the payload, a heredoc's lines and its end
	}{
		{"linked worktree's commondir", "wt", `mkdir -p evil && cp -r .git/objects .git/refs evil/ && cat > evil/config <<'EOF'
%[1]secho ../../../evil > .git/worktrees/wt/commondir && echo PLANTED-COMMONDIR
mv .git/worktrees/wt .git/worktrees/wt.aside && mkdir .git/worktrees/wt && cp -r .git/worktrees/wt.aside/. .git/worktrees/wt/ && echo ../../../evil > .git/worktrees/wt/commondir && echo PLANTED-RENAMED
true`},
		{"include inside the root", ".", `cat >> shared.cfg <<'EOF' && echo PLANTED-APPEND
%[1]srm -f shared.cfg && cat > shared.cfg <<'EOF' && echo PLANTED-REPLACE
%[1]strue`},
		{"submodule's .git file", ".", gitdir + `echo 'gitdir: ../evil' > libsub/.git && gitdir evil <<'EOF' && echo PLANTED-GITFILE
%[1]smv libsub libsub.aside && mkdir libsub && echo 'gitdir: ../evil' > libsub/.git && gitdir evil <<'EOF' && echo PLANTED-RENAMED
%[1]strue`},
		{"repository's commondir", ".", `mkdir -p evil && cp -r .git/objects .git/refs evil/ && cat > evil/config <<'EOF'
%[1]secho ../evil > .git/commondir && echo PLANTED-COMMONDIR
true`},
		{"submodule's commondir", "libsub", `mkdir -p evil && cp -r .git/modules/libsub/objects .git/modules/libsub/refs evil/ && cat > evil/config <<'EOF'
%[1]secho ../../../evil > .git/modules/libsub/commondir && echo PLANTED-COMMONDIR
true`},
		{"nested repository moved aside", "nested", `mv nested nested.aside && mkdir nested && cd nested && mkdir .git && cp -r ../nested.aside/.git/objects ../nested.aside/.git/refs .git/ && echo 'ref: refs/heads/main' > .git/HEAD && cat > .git/config <<'EOF' && echo PLANTED-NESTED
%[1]strue`},
		{"includeIf target", ".", `cat >> ifbranch.cfg <<'EOF' && echo PLANTED-INCLUDEIF
%[1]strue`},
		{"includeIf target of another branch", ".", `cat >> ifother.cfg <<'EOF' && git branch other && git symbolic-ref HEAD refs/heads/other && echo PLANTED-INCLUDEIF
%[1]strue`},
		{"missing include", ".", `rm -f missing.cfg; cat > missing.cfg <<'EOF' && echo PLANTED-MISSING
%[1]strue`},
		{"core.hooksPath", ".", `hook() { mkdir -p .githooks && printf '#!/bin/sh\ntouch %[2]s\n' > .githooks/post-index-change && chmod +x .githooks/post-index-change; }
hook && echo PLANTED-HOOK
mv .githooks .githooks.aside && hook && echo PLANTED-RENAMED
true`},
		{"config.worktree", ".", `cat >> .git/config.worktree <<'EOF' && echo PLANTED-CONFIG-WORKTREE
%[1]srm -f .git/config.worktree && cat > .git/config.worktree <<'EOF' && echo PLANTED-REPLACE
%[1]strue`},
		{"linked worktree's missing config.worktree", "wt", `cat > .git/worktrees/wt/config.worktree <<'EOF' && echo PLANTED-CONFIG-WORKTREE
%[1]strue`},
		{"submodule deeper than protect_depth", ".", gitdir + `cat >> .git/modules/d1/d2/d3/d4/libdeep/config <<'EOF' && echo PLANTED-CONFIG
%[1]secho 'gitdir: ../../../../../evil' > d1/d2/d3/d4/libdeep/.git && gitdir evil <<'EOF' && echo PLANTED-GITFILE
%[1]smv d1 d1.aside && mkdir -p d1/d2/d3/d4/libdeep && echo 'gitdir: ../../../../../evil' > d1/d2/d3/d4/libdeep/.git && gitdir evil <<'EOF' && echo PLANTED-RENAMED
%[1]strue`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			scripts := visibleDir(t)
			attack := func(marker string) string {
				f := filepath.Join(scripts, filepath.Base(marker)+".sh")
				// Each step goes on only if the one before it worked.
				script := fmt.Sprintf(c.script, payload(marker), marker)
				if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
					t.Fatal(err)
				}
				return f
			}
			ran := func(home, p, marker string) bool {
				t.Helper()
				// A README whose time changed makes git status refresh the
				// index and write it, which runs post-index-change.
				stamp := time.Unix(1_000_000_000, 0)
				os.Chtimes(filepath.Join(p, c.where, "README"), stamp, stamp)
				out, err := operatorGit(t, home, filepath.Join(p, c.where), "status")
				if _, statErr := os.Stat(marker); statErr == nil {
					return true
				}
				if err != nil {
					t.Fatalf("the operator's git status fails after the run: %v\n%s", err, out)
				}
				return false
			}

			p, home := gitProject(t)
			marks := workspace(t)
			marker := filepath.Join(marks, "plain")
			r := plainBwrap{cred: uid1000, args: oldBinds(p)}.run(t, "sh", attack(marker))
			holeShown(t, ran(home, p, marker), "the operator's git status runs the agent's core.fsmonitor or hook", r)

			for _, inner := range []bool{false, true} {
				p, home := gitProject(t)
				marker := filepath.Join(marks, fmt.Sprint("agentjail-", inner))
				argv := []string{"sh", attack(marker)}
				if inner {
					// Its own namespaces first, unmounting what it can.
					argv = []string{"unshare", "-rm", "sh", "-c", fmt.Sprintf(
						`grep -o ' %s[^ ]* ' /proc/self/mountinfo | sort -r | while read m; do umount -l "$m" 2>/dev/null && echo UNMOUNTED "$m"; done; sh %s`, p, argv[1])}
				}
				before := gitMetadata(t, p)
				r := aj(t, append([]string{"run", "--write", p, "--chdir", p, "--"}, argv...)...)
				after := gitMetadata(t, p)
				if ran(home, p, marker) {
					t.Errorf("unshare %v: the operator's git status ran the agent's core.fsmonitor or hook", inner)
				}
				if strings.Contains(r.stdout, "PLANTED") || strings.Contains(r.stdout, "UNMOUNTED") {
					t.Errorf("unshare %v: a step of the attack worked in the jail:\n%s", inner, r.stdout)
				}
				if !strings.Contains(r.stderr, "Read-only file system") && !strings.Contains(r.stderr, "Device or resource busy") {
					t.Errorf("unshare %v: the attack was not stopped by a read-only or busy mount (does it run at all?):\n%s", inner, r.stderr)
				}
				if after != before {
					t.Errorf("unshare %v: the repository's metadata changed on the host", inner)
				}
				if r.code != 0 {
					t.Errorf("unshare %v: exit code %d, want 0 (nothing was changed):\n%s", inner, r.code, r.stderr)
				}
			}
		})
	}
}

// TestEscapeGitPinnedDirectories (issue 14, item 3): every directory on
// the way from a writable root to what git reads is a mount point (bound
// over itself), so that the agent can neither move it aside for one of its
// own (TestEscapeGitMetadata's moved-aside steps) nor remove it: rename(2)
// and rmdir(2) fail with EBUSY before the file system is asked
// (fs/namei.c: vfs_rename and vfs_rmdir check is_local_mountpoint), also
// in the agent's own user and mount namespace, where its copies of the
// mounts are locked (mount_namespaces(7)) and umount fails. Each directory
// is tried alone, and put back if it moved. Plain bwrap, given what
// agentjail protected before, lets them be renamed, and its rmdir fails
// with ENOTEMPTY, not EBUSY: both checks can fail.
func TestEscapeGitPinnedDirectories(t *testing.T) {
	jailed(t)
	dirs := []string{"libsub", "nested", "nested/.git", "wt", ".githooks", "d1", "d1/d2/d3/d4", "d1/d2/d3/d4/libdeep",
		".git", ".git/hooks", ".git/modules", ".git/modules/libsub", ".git/modules/libsub/hooks", ".git/modules/d1",
		".git/modules/d1/d2/d3/d4/libdeep", ".git/worktrees", ".git/worktrees/wt"}
	const try = `for d in %s; do
  if e=$(mv -T "$d" "$d.aside" 2>&1); then echo "rename $d: done"; mv -T "$d.aside" "$d"; else echo "rename $d: ${e##*: }"; fi
  if e=$(rmdir "$d" 2>&1); then echo "rmdir $d: done"; mkdir "$d"; else echo "rmdir $d: ${e##*: }"; fi
done`
	script := fmt.Sprintf(try, strings.Join(dirs, " "))
	failures := func(out string) map[string]string {
		got := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if op, err, ok := strings.Cut(l, ": "); ok && (strings.HasPrefix(op, "rename ") || strings.HasPrefix(op, "rmdir ")) {
				got[op] = err
			}
		}
		return got
	}

	p, _ := gitProject(t)
	r := plainBwrap{cred: uid1000, args: oldBinds(p)}.run(t, "sh", "-c", script)
	base := failures(r.stdout)
	holeShown(t, base["rename libsub"] == "done" && base["rename .git/modules/libsub"] == "done" && base["rename d1"] == "done",
		"libsub, its git directory and d1 can be moved aside", r)
	holeShown(t, base["rmdir libsub"] == "Directory not empty", "rmdir of a directory that is no mount point is not EBUSY", r)

	for _, inner := range []bool{false, true} {
		p, _ := gitProject(t)
		argv := []string{"sh", "-c", script}
		if inner {
			argv = []string{"unshare", "-rm", "sh", "-c", fmt.Sprintf(
				`grep -o ' %s[^ ]* ' /proc/self/mountinfo | sort -r | while read m; do umount -l "$m" 2>/dev/null && echo UNMOUNTED "$m"; done; %s`, p, script)}
		}
		before := gitMetadata(t, p)
		r := aj(t, append([]string{"run", "--write", p, "--chdir", p, "--"}, argv...)...)
		wantCode(t, r, 0)
		got := failures(r.stdout)
		for _, d := range dirs {
			for _, op := range []string{"rename ", "rmdir "} {
				if e := got[op+d]; e != "Device or resource busy" {
					t.Errorf("unshare %v: %s%s: %q, want EBUSY", inner, op, d, e)
				}
			}
		}
		if strings.Contains(r.stdout, "UNMOUNTED") {
			t.Errorf("unshare %v: the agent unmounted a pin:\n%s", inner, r.stdout)
		}
		if gitMetadata(t, p) != before {
			t.Errorf("unshare %v: the repository's metadata changed on the host", inner)
		}
	}
}

// TestEscapeGitNewSubmodule: a submodule that was not there at the start
// needs no protected file: the agent enters one in the index, which it may
// write (`git update-index --add --cacheinfo 160000,<sha>,newsub`), and
// makes newsub/.git name a git directory of its own with a core.fsmonitor;
// the operator's next `git status` in the protected repository runs it.
// agentjail found it after the run (a violation), too late: the file was
// still there. Now each new .git and commondir is moved aside by
// descriptor before the violation is reported, and git status runs
// nothing.
func TestEscapeGitNewSubmodule(t *testing.T) {
	jailed(t)
	const attack = `sha=$(git rev-parse HEAD) &&
mkdir -p evil && cp -r .git/objects .git/refs evil/ && echo 'ref: refs/heads/main' > evil/HEAD &&
printf '[core]\n\tfsmonitor = "touch %s; false"\n' > evil/config &&
git update-index --add --cacheinfo 160000,$sha,newsub && mkdir newsub && echo 'gitdir: ../evil' > newsub/.git && echo PLANTED`
	marks := workspace(t)
	status := func(home, p, marker string) bool {
		t.Helper()
		out, err := operatorGit(t, home, p, "status")
		if _, statErr := os.Stat(marker); statErr == nil {
			return true
		}
		if err != nil {
			t.Fatalf("the operator's git status fails after the run: %v\n%s", err, out)
		}
		return false
	}

	p, home := gitProject(t)
	marker := filepath.Join(marks, "plain")
	binds := []string{"--bind", p, p, "--chdir", p}
	for _, f := range []string{".git/hooks", ".git/config", ".gitmodules"} {
		binds = append(binds, "--ro-bind", filepath.Join(p, f), filepath.Join(p, f))
	}
	r := plainBwrap{cred: uid1000, args: binds}.run(t, "sh", "-c", fmt.Sprintf(attack, marker))
	holeShown(t, strings.Contains(r.stdout, "PLANTED") && status(home, p, marker), "the operator's git status runs the new submodule's core.fsmonitor", r)

	p, home = gitProject(t)
	marker = filepath.Join(marks, "agentjail")
	r = aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", fmt.Sprintf(attack, marker))
	wantCode(t, r, 123)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the attack did not run in the jail:\n%s\n%s", r.stdout, r.stderr)
	}
	gitfile := filepath.Join(p, "newsub/.git")
	if !strings.Contains(r.stderr, "agentjail: violation: "+gitfile+" appeared during the run: git takes it for a git directory (.git); moved aside to "+gitfile+".agentjail-quarantine-") {
		t.Errorf("no violation says the new .git was moved aside:\n%s", r.stderr)
	}
	if status(home, p, marker) {
		t.Error("the operator's git status ran the agent's core.fsmonitor")
	}
}

// TestEscapeGitNewBareRepository: a directory that holds HEAD, objects
// and refs is a git directory to git, a bare one, whatever objects and
// refs are (git asks only access(2), which follows links). The agent made
// src/ one, with links for objects and refs, core.worktree = . and a
// core.fsmonitor: the operator's next `git status` in src ran it. The
// finder took only real directories for objects and refs, so nothing was
// reported; with real ones the new config was reported but left in place.
// It also made the name agentjail would move it aside to (it knows the
// run's id). Now the new git directory is found either way and its HEAD
// moved aside, to a name the jail could not know.
func TestEscapeGitNewBareRepository(t *testing.T) {
	jailed(t)
	const attack = `cd src && mkdir -p .cache/o .cache/r && ln -s .cache/o objects && ln -s .cache/r refs &&
echo 'ref: refs/heads/main' > HEAD &&
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = "touch %s; false"\n' > config &&
mkdir -p "HEAD.agentjail-quarantine-$AGENTJAIL_RUN" && echo PLANTED`
	marks := workspace(t)
	ran := func(home, dir, marker string) bool {
		t.Helper()
		operatorGit(t, home, dir, "status")
		return fileExists(marker)
	}

	p, home := gitProject(t)
	os.Mkdir(filepath.Join(p, "src"), 0o755)
	os.Chown(filepath.Join(p, "src"), runUID, runUID)
	marker := filepath.Join(marks, "plain")
	r := plainBwrap{cred: uid1000, args: []string{"--bind", p, p, "--chdir", p, "--setenv", "AGENTJAIL_RUN", "x"}}.run(t, "sh", "-c", fmt.Sprintf(attack, marker))
	holeShown(t, strings.Contains(r.stdout, "PLANTED") && ran(home, filepath.Join(p, "src"), marker), "the operator's git status runs the new bare repository's core.fsmonitor", r)

	p, home = gitProject(t)
	os.Mkdir(filepath.Join(p, "src"), 0o755)
	os.Chown(filepath.Join(p, "src"), runUID, runUID)
	marker = filepath.Join(marks, "agentjail")
	r = aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", fmt.Sprintf(attack, marker))
	wantCode(t, r, 123)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the attack did not run in the jail:\n%s\n%s", r.stdout, r.stderr)
	}
	src := filepath.Join(p, "src")
	if !strings.Contains(r.stderr, "agentjail: violation: "+src+" became a git directory during the run") ||
		!strings.Contains(r.stderr, "its HEAD moved aside to "+src+"/HEAD.agentjail-quarantine-") {
		t.Errorf("no violation says src's HEAD was moved aside:\n%s", r.stderr)
	}
	if ran(home, src, marker) {
		t.Error("the operator's git status ran the agent's core.fsmonitor")
	}
	if out, err := operatorGit(t, home, src, "rev-parse", "--absolute-git-dir"); err != nil || strings.TrimSpace(out) != filepath.Join(p, ".git") {
		t.Errorf("git in src uses %q (%v), not the project's repository", out, err)
	}
}

// TestEscapeGitHiddenRepositories: two ways a repository of the agent's
// hid from the search for protected paths and from the check after the
// run, both silent (exit 0), and the operator's next git ran the agent's
// code. A submodule entered in the index whose directory is named with
// bytes that are not UTF-8 (io/fs refuses such names: nothing below was
// read), its core.fsmonitor run by `git status` at the top; and a
// directory made a git directory by HEAD and a commondir naming where
// objects and refs are (git looks for them there), its core.pager run by
// `git log` in it. Now names are read whatever their bytes, and HEAD with
// a commondir is a git directory: both are found and moved aside. Then
// more (below): every .git born during the run is moved aside, also where
// the search does not go, which git reaches through a gitlink the index
// parser cannot see (a split index) or that is in a commit.
func TestEscapeGitHiddenRepositories(t *testing.T) {
	jailed(t)
	marks := workspace(t)
	for _, c := range []struct {
		name, agent string
		git         []string // the operator's command, in dir
		dir         string
	}{
		{"a name that is not UTF-8", `import os, subprocess as sp
d = b"vendor\xff"
sp.run([b"git", b"init", b"-q", d], check=True)
fsm = os.path.abspath(d) + b"/.git/fsm"
open(fsm, "w").write("#!/bin/sh\ntouch MARK\n"); os.chmod(fsm, 0o755)
sp.run([b"git", b"-C", d, b"config", b"core.fsmonitor", fsm], check=True)
sp.run([b"git", b"-C", d, b"-c", b"user.name=a", b"-c", b"user.email=a@b", b"commit", b"-q", b"--allow-empty", b"-m", b"x"], check=True)
sha = sp.run([b"git", b"-C", d, b"rev-parse", b"HEAD"], capture_output=True, check=True).stdout.strip()
sp.run([b"git", b"update-index", b"--add", b"--cacheinfo", b"160000," + sha + b"," + d], check=True)
print("PLANTED")
`, []string{"status"}, ""},
		{"HEAD and a commondir", `import os, subprocess as sp
s = os.path.abspath("store")
os.makedirs(s + "/objects"); os.makedirs(s + "/refs/heads")
open(s + "/config", "w").write("[core]\n\trepositoryformatversion = 0\n\tpager = " + s + "/x\n")
open(s + "/x", "w").write("#!/bin/sh\ntouch MARK\nexec cat\n"); os.chmod(s + "/x", 0o755)
open("src/HEAD", "w").write("ref: refs/heads/main\n"); open("src/commondir", "w").write("../store\n")
env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@b")
tree = sp.run(["git", "hash-object", "-t", "tree", "-w", "--stdin"], cwd="src", input=b"", capture_output=True, check=True).stdout.strip()
commit = sp.run(["git", "commit-tree", tree], cwd="src", input=b"msg", capture_output=True, check=True, env=env).stdout.strip()
sp.run(["git", "update-ref", "refs/heads/main", commit], cwd="src", check=True)
print("PLANTED")
`, []string{"-p", "log"}, "src"},
		{"the top made a git directory beside a .git made none", shellAgent(`cp .git/HEAD HEAD; cp .git/index index; ln -s .git/objects objects; ln -s .git/refs refs
printf '#!/bin/sh\\ntouch MARK\\n' > evil.sh; chmod +x evil.sh
printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = %s/evil.sh\\n' "$PWD" > config
echo garbage > .git/HEAD
`), []string{"status"}, ""},
		{"an empty .git in front of a git directory", shellAgent(`P=$PWD; cd src && mkdir .git && git init -q --bare . && git config core.bare false && git config core.worktree .
printf '#!/bin/sh\\ntouch MARK\\n' > evil.sh; chmod +x evil.sh; git config core.fsmonitor "$P/src/evil.sh"
`), []string{"status"}, "src"},
		{"a submodule in node_modules, in a split index", shellAgent(evilRepo("node_modules/x") + `git update-index --add --cacheinfo 160000,$h,node_modules/x
git update-index --split-index
`), []string{"status"}, ""},
		{"a submodule in node_modules, in a commit the operator checks out", shellAgent(evilRepo("node_modules/x") + `export GIT_INDEX_FILE=$PWD/node_modules/.idx; git read-tree HEAD
git update-index --add --cacheinfo 160000,$h,node_modules/x
c=$(git -c user.email=a@b -c user.name=a commit-tree -p HEAD -m fix $(git write-tree)); unset GIT_INDEX_FILE
git update-ref refs/heads/agent-fix $c
`), []string{"checkout", "-q", "agent-fix"}, ""},
		{"a submodule below the objects of what looks like a git directory", shellAgent(`mkdir -p vendor/objects vendor/refs; : > vendor/HEAD
` + evilRepo("vendor/objects/x") + `git update-index --add --cacheinfo 160000,$h,vendor/objects/x
`), []string{"status"}, ""},
		{"a submodule in node_modules", shellAgent(evilRepo("node_modules/x") + `git update-index --add --cacheinfo 160000,$h,node_modules/x
`), []string{"status"}, ""},
		// old/ is there before the run (the setup below): renamed, it
		// keeps its birth time.
		{"an older directory renamed to a .git in node_modules, in a commit", shellAgent(`rm -rf old/* && git init -q --bare old && git --git-dir=old config core.bare false
printf '#!/bin/sh\ntouch MARK\n' > .fsm.sh; chmod +x .fsm.sh; git --git-dir=old config core.fsmonitor "$PWD/.fsm.sh"
mkdir -p node_modules/pkg && mv old node_modules/pkg/.git
h=$(git rev-parse HEAD); export GIT_INDEX_FILE=$PWD/.idx; git read-tree HEAD
git update-index --add --cacheinfo 160000,$h,node_modules/pkg
c=$(git -c user.email=a@b -c user.name=a commit-tree -p HEAD -m deps $(git write-tree)); unset GIT_INDEX_FILE
git update-ref refs/heads/agent-deps $c
`), []string{"checkout", "-q", "agent-deps"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			home, p := workspace(t), workspace(t)
			for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "start"}} {
				if out, err := operatorGit(t, home, p, args...); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			for _, d := range []string{"src", "old"} {
				os.Mkdir(filepath.Join(p, d), 0o755)
				os.Chown(filepath.Join(p, d), runUID, runUID)
			}
			write(t, p, map[string]string{"old/keep": "x"})
			os.Chown(filepath.Join(p, "old/keep"), runUID, runUID)
			marker := filepath.Join(marks, strings.ReplaceAll(c.name, " ", "-"))
			agent := strings.ReplaceAll(c.agent, "MARK", marker)
			write(t, p, map[string]string{".agent.py": agent})
			os.Chown(filepath.Join(p, ".agent.py"), runUID, runUID)
			r := aj(t, "run", "--write", p, "--chdir", p, "--", "/usr/bin/python3", ".agent.py")
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("the attack did not run in the jail (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			wantCode(t, r, 123)
			if !strings.Contains(r.stderr, "moved aside to ") {
				t.Errorf("nothing was moved aside:\n%s", r.stderr)
			}
			operatorGit(t, home, filepath.Join(p, c.dir), c.git...)
			if fileExists(marker) {
				t.Errorf("the operator's git %v ran the agent's code", c.git)
			}
		})
	}
}

// shellAgent is an agent, for TestEscapeGitHiddenRepositories, that runs
// the shell script sh and says PLANTED once it has.
func shellAgent(sh string) string {
	return "import os\nsh = \"\"\"set -e\n" + sh + "\"\"\"\nos.system(sh) == 0 and print(\"PLANTED\")\n"
}

// evilRepo is a shell script that makes dir a repository whose
// core.fsmonitor touches MARK, leaves its commit in $h, and goes back.
func evilRepo(dir string) string {
	return strings.ReplaceAll(`mkdir -p DIR && cd DIR && git init -q .
printf '#!/bin/sh\\ntouch MARK\\n' > ../.fsm.sh; chmod +x ../.fsm.sh
git config core.fsmonitor "$PWD/../.fsm.sh"
git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x; h=$(git rev-parse HEAD); cd "$OLDPWD"
`, "DIR", dir)
}

// TestEscapeGitUnreadableDirectory: an operator not root runs agentjail,
// and the agent as that operator. It made sub/.git a repository of its
// own with a core.fsmonitor, then sub unreadable (0311): agentjail, as the
// operator, could not list sub, so the check after the run saw no new
// .git (exit 0), and `git status` in sub ran the agent's command (git
// needs only to pass through sub). Now a directory the run user could
// write that the check cannot read is a violation, and the next run is
// refused until it is readable again.
func TestEscapeGitUnreadableDirectory(t *testing.T) {
	jailed(t)
	xdg := visibleDir(t)
	os.Chmod(xdg, 0o700)
	ws := workspace(t)
	sub := filepath.Join(ws, "sub")
	t.Cleanup(func() { os.Chmod(sub, 0o755) })
	inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
	const attack = `mkdir -p sub/.git && cd sub/.git && git init -q --bare . && git config core.bare false && git config core.worktree .. &&
printf '#!/bin/sh\ntrue\n' > fsm && chmod +x fsm && git config core.fsmonitor "$PWD/fsm" && cd ../.. && chmod 0311 sub && echo PLANTED`
	r := inv.run(t, "run", "--write", ws, "--", "sh", "-c", attack)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the attack did not run in the jail (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantCode(t, r, 123)
	if !strings.Contains(r.stderr, "agentjail: violation: "+sub+" could not be read after the run") {
		t.Errorf("no violation says sub could not be read:\n%s", r.stderr)
	}
	r = inv.run(t, "run", "--write", ws, "--", "true")
	wantCode(t, r, 125)
	if !strings.Contains(r.stderr, sub+", under a writable root, cannot be read, so the protected paths below it cannot be found") {
		t.Errorf("the next run is not refused, naming sub:\n%s", r.stderr)
	}
}

// TestEscapeGitGlobalConfigInAWritableHome: with the operator's home a
// writable root, the profiles protected ~/.gitconfig by name, yet git reads
// the user's configuration from ~/.config/git/config too, and from every
// file ~/.gitconfig includes; the agent wrote a core.fsmonitor there, and
// the operator's next `git status` in any repository ran it. Now both, and
// every include, are read-only (uncreatable when missing) in such a home.
func TestEscapeGitGlobalConfigInAWritableHome(t *testing.T) {
	jailed(t)
	attack := func(home, marker string) string {
		cfg := fmt.Sprintf(`[core]\n\tfsmonitor = "touch %s; false"\n`, marker)
		return fmt.Sprintf(`cd %s && printf '%s' >> .gitconfig.local && echo PLANTED-INCLUDE; mkdir -p .config/git && printf '%s' > .config/git/config && echo PLANTED-XDG; true`, home, cfg, cfg)
	}
	setup := func() (home, repo string) {
		home, repo = workspace(t), workspace(t)
		write(t, home, map[string]string{".gitconfig": "[include]\n\tpath = ~/.gitconfig.local\n", ".gitconfig.local": "[color]\n\tui = auto\n"})
		if out, err := operatorGit(t, home, repo, "init", "-q"); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		return home, repo
	}
	ran := func(home, repo, marker string) bool {
		t.Helper()
		out, err := operatorGit(t, home, repo, "status")
		if fileExists(marker) {
			return true
		}
		if err != nil {
			t.Fatalf("the operator's git status fails: %v\n%s", err, out)
		}
		return false
	}
	marks := workspace(t)

	for _, xdg := range []bool{false, true} {
		home, repo := setup()
		marker := filepath.Join(marks, fmt.Sprint("plain-", xdg))
		script := attack(home, marker)
		if xdg {
			script = strings.Replace(script, ".gitconfig.local", "/dev/null", 1)
		}
		r := plainBwrap{cred: uid1000, args: []string{"--bind", home, home, "--ro-bind", filepath.Join(home, ".gitconfig"), filepath.Join(home, ".gitconfig")}}.run(t, "sh", "-c", script)
		holeShown(t, ran(home, repo, marker), fmt.Sprintf("the operator's git status runs a core.fsmonitor from the home (XDG file: %v)", xdg), r)
	}

	home, repo := setup()
	marker := filepath.Join(marks, "agentjail")
	r := invocation{env: []string{"HOME=" + home}, dir: home}.run(t, "run", "--write", home, "--", "sh", "-c", attack(home, marker))
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "PLANTED") {
		t.Errorf("the agent wrote git's configuration in the home:\n%s", r.stdout)
	}
	if ran(home, repo, marker) {
		t.Error("the operator's git status ran the agent's core.fsmonitor")
	}
}

// TestEscapeGitPlantedBareDirectories: a directory with a HEAD and a refs
// is a git directory to git, config or hooks or none. An agent planted
// hundreds: the run ended clean, and every later run on the project
// masked their config, hooks and commondir, slow (12 s for 700) or
// refused (past bubblewrap's 9000 arguments). Each is a violation now,
// its HEAD moved aside.
func TestEscapeGitPlantedBareDirectories(t *testing.T) {
	jailed(t)
	p := workspace(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c",
		`for i in 1 2 3; do mkdir -p bare/b$i/refs && echo 'ref: refs/heads/main' > bare/b$i/HEAD; done`)
	wantCode(t, r, 123)
	for _, i := range []string{"1", "2", "3"} {
		dir := filepath.Join(p, "bare", "b"+i)
		if !strings.Contains(r.stderr, "agentjail: violation: "+dir+" became a git directory during the run") || fileExists(filepath.Join(dir, "HEAD")) {
			t.Errorf("b%s: not reported or its HEAD not moved aside:\n%s", i, r.stderr)
		}
	}
	r = aj(t, "run", "--write", p, "--chdir", p, "--", "true")
	wantCode(t, r, 0)
}

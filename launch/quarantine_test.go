package launch

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
)

// TestQuarantine: what a run made that git takes for a git directory (a
// new .git file or directory, a new commondir) is moved aside, in its own
// directory, and said so; the rest is reported as ProtectedChanges does; a
// path through a link in the writable root is not followed.
func TestQuarantine(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	j := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{".git/hooks", ".git/worktrees/w", "newsub", "x/.git/hooks", "old/.git/modules/m"} {
		os.MkdirAll(j(d), 0o755)
	}
	for p, data := range map[string]string{
		".git/config": "", ".env": "changed", "newsub/.git": "gitdir: ../evil\n", "x/.git/config": "",
		".git/worktrees/w/commondir": "../../../evil\n", "old/.git/modules/m/config": "",
	} {
		os.WriteFile(j(p), []byte(data), 0o644)
	}
	os.MkdirAll(filepath.Join(outside, ".git"), 0o755)
	os.Symlink(outside, j("y"))

	e := mounts.Entry{Size: 1}
	before := mounts.Snapshot{j(".git/config"): e, j(".git/hooks"): e, j(".env"): e}
	after := mounts.Snapshot{j(".git/config"): e, j(".git/hooks"): e, j(".env"): {Size: 7},
		j("newsub/.git"): e, j("x/.git/config"): e, j("x/.git/hooks"): e, j(".git/worktrees/w/commondir"): e, j("y/.git"): e,
		j("old/.git/modules/m/config"): e}
	// old/.git was there, without config or hooks (masked in the jail).
	protected := []string{j("old/.git/config"), j("old/.git/hooks")}
	notes := quarantine(before, after, protected, gitFound{}, hostfs.Walker{Roots: []string{root}}, "RUN", nil)
	var details []string
	for _, n := range notes {
		details = append(details, n.Detail)
	}
	all := strings.Join(details, "\n")
	for _, p := range []string{".git/worktrees/w/commondir", "newsub/.git", "x/.git"} {
		aside := j(p) + ".agentjail-quarantine-RUN"
		if _, err := os.Lstat(aside); err != nil {
			t.Errorf("%s was not moved aside: %v", p, err)
		}
		if _, err := os.Lstat(j(p)); err == nil {
			t.Errorf("%s is still there", p)
		}
		if !strings.Contains(all, j(p)+" appeared during the run: git takes it for a git directory") || !strings.Contains(all, "moved aside to "+aside) {
			t.Errorf("no note says %s was moved aside:\n%s", p, all)
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, ".git")); err != nil {
		t.Errorf("the .git through the link was moved: %v", err)
	}
	if !strings.Contains(all, j("y/.git")+" appeared during the run: git takes it for a git directory (.git), and could not be moved aside") {
		t.Errorf("no note says y/.git could not be moved:\n%s", all)
	}
	if _, err := os.Lstat(j("old/.git")); err != nil {
		t.Errorf("old/.git, there before the run, was moved: %v", err)
	}
	if len(notes) != 6 || !strings.Contains(all, j(".env")+" changed during the run") || !strings.Contains(all, j("old/.git/modules/m/config")+" appeared") || strings.Contains(all, "x/.git/config") {
		t.Errorf("notes:\n%s", all)
	}
}

// TestQuarantineBareAndTakenName: a directory the run made a bare git
// directory (HEAD, objects and refs, whatever they are: links count, as
// git's access(2) follows them) with config of its own loses its HEAD,
// the rest of it staying, and what else changed in it is still reported;
// a bare git directory there before the run is left alone; and a .git
// whose quarantine name the jail made first (it knows the run's id) is
// moved to a name it could not know.
func TestQuarantineBareAndTakenName(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"src/.cache/o", "src/refs", "mirror/objects", "mirror/refs", "z/.git", "z/.git.agentjail-quarantine-RUN"} {
		os.MkdirAll(j(d), 0o755)
	}
	os.Symlink(".cache/o", j("src/objects"))
	for p, data := range map[string]string{
		"src/HEAD": "ref: refs/heads/main\n", "src/config": "[core]\n\tworktree = .\n\tfsmonitor = touch /tmp/pwned\n", "src/.env": "x",
		"src/main.go": "package main\n", "mirror/HEAD": "ref: refs/heads/main\n", "mirror/config": "", "z/.git/config": "",
	} {
		os.WriteFile(j(p), []byte(data), 0o644)
	}
	e := mounts.Entry{Size: 1}
	before := mounts.Snapshot{j("mirror/config"): e, j("src/.env"): e}
	after := mounts.Snapshot{j("mirror/config"): e, j("src/.env"): {Size: 2}, j("src/config"): e, j("z/.git/config"): e}
	notes := quarantine(before, after, []string{j("mirror/hooks")}, gitFound{}, hostfs.Walker{Roots: []string{root}}, "RUN", nil)
	var details []string
	for _, n := range notes {
		details = append(details, n.Detail)
	}
	all := strings.Join(details, "\n")
	if _, err := os.Lstat(j("src/HEAD")); err == nil {
		t.Errorf("src/HEAD is still there")
	}
	for _, p := range []string{"src/HEAD.agentjail-quarantine-RUN", "src/config", "src/main.go", "mirror/HEAD"} {
		if _, err := os.Lstat(j(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !strings.Contains(all, j("src")+" became a git directory during the run") || !strings.Contains(all, "its HEAD moved aside to "+j("src/HEAD.agentjail-quarantine-RUN")) {
		t.Errorf("no note says src's HEAD was moved aside:\n%s", all)
	}
	if !strings.Contains(all, j("src/.env")+" changed during the run") || strings.Contains(all, "src/config appeared") || strings.Contains(all, "mirror") {
		t.Errorf("notes:\n%s", all)
	}
	moved, _ := filepath.Glob(j("z/.git.agentjail-quarantine-RUN-*"))
	if _, err := os.Lstat(j("z/.git")); err == nil || len(moved) != 1 || !strings.Contains(all, "moved aside to "+moved[0]) {
		t.Errorf("z/.git, its quarantine name taken: moved to %q:\n%s", moved, all)
	}
	if len(notes) != 3 {
		t.Errorf("%d notes, want 3:\n%s", len(notes), all)
	}
}

// TestPlaceholderShaped: only an empty file or an empty directory passes
// for a mask's mount point; a registered placeholder another run's agent
// replaced with a repository (or a link, or a FIFO) is not passed over.
func TestPlaceholderShaped(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	j := func(p string) string { return filepath.Join(root, p) }
	os.WriteFile(j("empty"), nil, 0o444)
	os.WriteFile(j("full"), []byte("gitdir: /elsewhere\n"), 0o644)
	os.Mkdir(j("emptydir"), 0o755)
	os.MkdirAll(j("repo/objects"), 0o755)
	os.Symlink(j("emptydir"), j("link"))
	syscall.Mkfifo(j("fifo"), 0o644)
	w := hostfs.Walker{Roots: []string{root}}
	for name, want := range map[string]bool{"empty": true, "emptydir": true, "full": false, "repo": false, "link": false, "fifo": false, "missing": false} {
		if got := placeholderShaped(w, j(name)); got != want {
			t.Errorf("%s: placeholderShaped = %v, want %v", name, got, want)
		}
	}
}

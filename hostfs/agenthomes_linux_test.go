package hostfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/testutil"
	"github.com/agentjail/agentjail/procs"
)

func owner(t *testing.T, p string) int {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestMakeAgentHomes: the agent-homes directory is traversable but not listable, its
// copies are the run user's with the source's modes, a source that is a
// link is followed, links inside a tree stay links, fifos are skipped, and
// a copy with Data holds that data, not its source's.
func TestMakeAgentHomes(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(src, ".ssh", "id_ed25519"), []byte("key"), 0o600)
	os.Symlink("id_ed25519", filepath.Join(src, ".ssh", "link"))
	syscall.Mkfifo(filepath.Join(src, ".ssh", "fifo"), 0o600)
	os.WriteFile(filepath.Join(src, "creds.json"), []byte(`{"a":1}`), 0o600)
	os.Symlink(filepath.Join(src, "creds.json"), filepath.Join(src, "creds-link"))

	run := filepath.Join(t.TempDir(), "runs")
	os.Mkdir(run, 0o700) // as the state registries make it
	root := filepath.Join(run, "RUN")
	st, err := MakeAgentHomes(root, []AgentHomeDir{{Path: filepath.Join(root, "claude"), Size: 1 << 20}}, []FileCopy{
		{Src: filepath.Join(src, ".ssh"), Dst: filepath.Join(root, "credentials", ".ssh")},
		{Src: filepath.Join(src, "creds-link"), Dst: filepath.Join(root, "claude", ".credentials.json")},
		{Src: filepath.Join(src, "creds.json"), Dst: filepath.Join(root, "claude", "made.json"), Data: []byte(`{"b":2}`)},
	}, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	for p, mode := range map[string]os.FileMode{
		run: 0o711, root: 0o711,
		filepath.Join(root, "claude"):                      0o700,
		filepath.Join(root, "credentials", ".ssh"):         0o700,
		filepath.Join(root, "credentials/.ssh/id_ed25519"): 0o600,
		filepath.Join(root, "claude/.credentials.json"):    0o600,
		filepath.Join(root, "claude/made.json"):            0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&mode != mode || (p != run && p != root && fi.Mode().Perm() != mode) {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, mode)
		}
	}
	for _, p := range []string{"claude", "credentials", "credentials/.ssh", "credentials/.ssh/id_ed25519", "credentials/.ssh/link", "claude/.credentials.json", "claude/made.json"} {
		if got := owner(t, filepath.Join(root, p)); got != 1000 {
			t.Errorf("%s is owned by %d, want 1000", p, got)
		}
	}
	if owner(t, root) != 0 {
		t.Errorf("the homes root must stay root's")
	}
	if l, err := os.Readlink(filepath.Join(root, "credentials/.ssh/link")); err != nil || l != "id_ed25519" {
		t.Errorf("link inside the tree: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "credentials/.ssh/fifo")); err == nil {
		t.Errorf("a fifo was copied")
	}
	for name, want := range map[string]string{".credentials.json": `{"a":1}`, "made.json": `{"b":2}`} {
		if got, err := os.ReadFile(filepath.Join(root, "claude", name)); string(got) != want {
			t.Errorf("claude/%s holds %q (%v), want %q", name, got, err, want)
		}
	}
	// The sized directory is a tmpfs of that size, holding the copy.
	var fsys unix.Statfs_t
	if err := unix.Statfs(filepath.Join(root, "claude"), &fsys); err != nil || fsys.Type != unix.TMPFS_MAGIC || len(st.Degradations) != 0 {
		t.Errorf("claude/ is no tmpfs (type %#x, %v, %v)", fsys.Type, err, st.Degradations)
	}
	// Only this thread's private copy of the mount namespace has it.
	if mi, _ := os.ReadFile("/proc/1/mountinfo"); strings.Contains(string(mi), root) {
		t.Errorf("the tmpfs is mounted where PID 1 sees it")
	}
	if err := os.WriteFile(filepath.Join(root, "claude", "big"), make([]byte, 2<<20), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 2 MiB into a 1 MiB directory: %v, want ENOSPC", err)
	}
	if err := st.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err == nil {
		t.Errorf("Remove left %s", root)
	}
	if mi, _ := os.ReadFile("/proc/thread-self/mountinfo"); strings.Contains(string(mi), root) {
		t.Errorf("Remove left a mount under %s", root)
	}
	if _, err := MakeAgentHomes(filepath.Join(run, "R2"), nil, []FileCopy{{Src: filepath.Join(src, "missing"), Dst: filepath.Join(run, "R2", "x")}}, 1000, 1000); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing source: %v", err)
	}
}

// TestOpenOwnedRefuses: what the run user leaves behind is read only when
// it is a plain file of its own: never through a link (final or in the
// path), never a hard link to someone else's file.
func TestOpenOwnedRefuses(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	root := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root's"), 0o600)
	own := filepath.Join(root, "own.json")
	os.WriteFile(own, []byte("mine"), 0o600)
	os.Chown(own, 1000, 1000)
	os.Symlink(secret, filepath.Join(root, "link.json"))
	os.Mkdir(filepath.Join(root, "real"), 0o755)
	os.WriteFile(filepath.Join(root, "real", "f.json"), []byte("x"), 0o600)
	os.Chown(filepath.Join(root, "real", "f.json"), 1000, 1000)
	os.Symlink("real", filepath.Join(root, "dirlink"))
	os.Link(secret, filepath.Join(root, "hard.json"))
	big := filepath.Join(root, "big.json")
	os.WriteFile(big, make([]byte, 100), 0o600)
	os.Chown(big, 1000, 1000)

	if b, err := readOwned(root, "own.json", 1000, 10); err != nil || string(b) != "mine" {
		t.Errorf("own file: %q %v", b, err)
	}
	for _, rel := range []string{"link.json", "dirlink/f.json", "hard.json", "big.json", "../" + filepath.Base(root) + "/own.json", "missing"} {
		if b, err := readOwned(root, rel, 1000, 10); err == nil {
			t.Errorf("openOwned(%s) gave %q, want an error", rel, b)
		}
	}
}

// TestCopyTranscripts: transcripts are copied as new files, owned by the
// owner of results, sessions first; a link or someone else's file is not
// copied, a taken name gets a new one, and the caps on count and bytes
// hold.
func TestCopyTranscripts(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"projects/-w/s1.jsonl":                   `{"a":1}`,
		"projects/-w/s1/subagents/agent-x.jsonl": `{"b":2}`,
		"projects/-w/taken.jsonl":                `{"c":3}`,
		"projects/-w/notes.txt":                  "not a transcript",
		"history.jsonl":                          "not in projects",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o600)
		os.Chown(p, 1000, 1000)
	}
	secret := filepath.Join(t.TempDir(), "secret.jsonl")
	os.WriteFile(secret, []byte("root's"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "projects/-w/evil.jsonl"))

	results := filepath.Join(t.TempDir(), "results")
	os.Mkdir(results, 0o755)
	os.WriteFile(filepath.Join(results, "taken.jsonl"), []byte("an earlier run's"), 0o600)
	os.Chown(results, 1000, 1000)
	out, err := Walker{}.Dir(results)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	got, skipped := CopyTranscripts(dir, out, 1000, MaxTranscripts, MaxTranscriptBytes, time.Time{})
	if len(skipped) != 1 || !strings.Contains(skipped[0], "evil.jsonl") {
		t.Errorf("the link was not reported alone: %q", skipped)
	}
	want := []string{filepath.Join(results, "s1.jsonl"), filepath.Join(results, "taken.1.jsonl"), filepath.Join(results, "s1/subagents/agent-x.jsonl")}
	if !slices.Equal(got, want) {
		t.Fatalf("copied %v, want %v", got, want)
	}
	for _, p := range append(want, filepath.Join(results, "s1"), filepath.Join(results, "s1/subagents")) {
		if owner(t, p) != 1000 {
			t.Errorf("%s is owned by %d, want the owner of results", p, owner(t, p))
		}
	}
	if b, _ := os.ReadFile(want[0]); string(b) != `{"a":1}` {
		t.Errorf("%s: %q", want[0], b)
	}
	if b, _ := os.ReadFile(filepath.Join(results, "taken.jsonl")); string(b) != "an earlier run's" {
		t.Errorf("an earlier transcript was overwritten: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(results, "evil.jsonl")); err == nil {
		t.Errorf("a link's target was copied out")
	}
	if got, skipped := CopyTranscripts(t.TempDir(), out, 1000, MaxTranscripts, MaxTranscriptBytes, time.Time{}); len(skipped) != 0 || len(got) != 0 {
		t.Errorf("no projects directory: %v %v", got, skipped)
	}

	// The caps: 2 files, 10 bytes. The sessions come first (a and c, 8
	// bytes); b (5 bytes) would pass the bytes, d the count.
	caps := t.TempDir()
	for name, content := range map[string]string{"a.jsonl": "1234", "b/x.jsonl": "12345", "c.jsonl": "1234", "d.jsonl": "1"} {
		p := filepath.Join(caps, "projects/-w", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o600)
		os.Chown(p, 1000, 1000)
	}
	capped, _ := Walker{}.Dir(t.TempDir())
	defer capped.Close()
	got, skipped = CopyTranscripts(caps, capped, 1000, 2, 10, time.Time{})
	if want := []string{filepath.Join(capped.Path, "a.jsonl"), filepath.Join(capped.Path, "c.jsonl")}; !slices.Equal(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
	if strings.Join(skipped, "\n") != "2 transcripts not copied: a run copies at most 2" {
		t.Errorf("skipped %q", skipped)
	}
	got, skipped = CopyTranscripts(caps, capped, 1000, 10, 10, time.Time{})
	if len(got) != 3 || !slices.Equal(skipped, []string{"1 transcripts not copied: they would pass the 10 bytes a run copies in all"}) {
		t.Errorf("a second copy under the byte cap: %v, skipped %q", got, skipped)
	}
}

func TestEmptyFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	p := filepath.Join(dir, "empty")
	for range 2 {
		if err := EmptyFile(p); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o444 {
		t.Errorf("%v %v", fi, err)
	}
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("x"), 0o644)
	if err := EmptyFile(p); err == nil {
		t.Errorf("a file that is not empty is used")
	}
}

// readOwned reads what openOwned opens.
func readOwned(root, rel string, uid int, max int64) ([]byte, error) {
	f, err := openOwned(root, rel, uid, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// TestRemoveAgentHomesWithoutTheMountTable: without the mount table,
// nothing is removed (a deletion would descend into what may still be
// mounted there), and the error says the directory is left.
func TestRemoveAgentHomesWithoutTheMountTable(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(root, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := removeAgentHomes(root, func() ([]procs.Mount, error) { return nil, errors.New("cannot read the mount table: EACCES") })
	if err == nil || !strings.Contains(err.Error(), root+" is left") {
		t.Errorf("got %v, want an error saying %s is left", err, root)
	}
	if _, err := os.Stat(filepath.Join(root, "home")); err != nil {
		t.Errorf("removed without the mount table: %v", err)
	}
	if err := removeAgentHomes(root, func() ([]procs.Mount, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with the mount table, %s is still there: %v", root, err)
	}
}

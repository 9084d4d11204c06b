package mounts

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// gitIn runs git in dir, with no configuration but its own, failing t
// if it fails.
func gitIn(t *testing.T, dir string) func(args ...string) {
	return func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

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
		git := gitIn(t, dir)
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
		got := links(data)
		if want := []string{"node_modules/x", "vendor/deep/sub"}; !slices.Equal(got, want) {
			t.Errorf("version %s: gitlinks = %q, want %q", version, got, want)
		}
		for cut := range len(data) {
			if len(links(data[:cut])) > 2 {
				t.Fatalf("version %s cut at %d: more gitlinks than there are", version, cut)
			}
		}
		if version == "2" {
			// A name with NULs in it, its length in the flags, as git
			// reads it: the entries after it are still found.
			if got := links(withNULName(t, data, "README")); !slices.Equal(got, []string{"node_modules/x", "vendor/deep/sub"}) {
				t.Errorf("after a name holding NULs: gitlinks = %q", got)
			}
		}
	}
	if links([]byte("not an index at all")) != nil {
		t.Error("gitlinks of no index")
	}
}

// links is gitlinks of data.
func links(data []byte) []string {
	l, _ := gitlinks(bytes.NewReader(data))
	return l
}

// withNULName is a version 2 index with the entry named name renamed to
// name and 65 NULs, its length in its flags and its padding made anew.
func withNULName(t *testing.T, data []byte, name string) []byte {
	t.Helper()
	n := binary.BigEndian.Uint32(data[8:12])
	out := append([]byte(nil), data[:12]...)
	off := 12
	for range n {
		flags := binary.BigEndian.Uint16(data[off+60 : off+62])
		l := int(flags & 0xfff)
		size := (62 + l + 8) &^ 7
		e := append([]byte(nil), data[off:off+size]...)
		if string(data[off+62:off+62+l]) == name {
			nn := append([]byte(name), make([]byte, 65)...)
			e = append(e[:60], 0, 0)
			binary.BigEndian.PutUint16(e[60:62], flags&^0xfff|uint16(len(nn)))
			e = append(e, nn...)
			e = append(e, make([]byte, (62+len(nn)+8)&^7-len(e))...)
		}
		out = append(out, e...)
		off += size
	}
	return append(out, data[off:]...)
}

// openCounter is a Disk that lists the files opened.
type openCounter struct {
	fstest.MapFS
	opened *[]string
}

func (d openCounter) Open(name string) (fs.File, error) {
	*d.opened = append(*d.opened, "/"+name)
	return d.MapFS.Open(name)
}

// TestIndexReadOnlyWhereTheWalkSkipped: a repository's index is read for
// gitlinks only where the walk skipped a directory (node_modules) below
// its work tree: elsewhere every gitlink leads where the walk went, and a
// large repository's index is not read at every launch for nothing.
func TestIndexReadOnlyWhereTheWalkSkipped(t *testing.T) {
	t.Parallel()
	p := gitPolicy(t)
	for _, modules := range []bool{false, true} {
		d := gitTree()
		d["srv/proj/.git/index"] = node(0o644, 1000, 1000, "DIRC\x00\x00\x00\x02\x00\x00\x00\x00")
		for name := range d {
			if strings.Contains(name, "node_modules") {
				delete(d, name)
			}
		}
		if modules {
			d["srv/proj/web/node_modules/left-pad/index.js"] = node(0o644, 1000, 1000, "")
		}
		var opened []string
		pr := findProtected(openCounter{d, &opened}, WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, nil)
		if len(pr.errs) != 0 {
			t.Fatal(pr.errs)
		}
		if read := slices.Contains(opened, "/srv/proj/.git/index"); read != modules {
			t.Errorf("node_modules below the work tree %v: the index read %v", modules, read)
		}
	}
}

// TestSplitIndexGitlinks: the gitlinks of a split index (core.splitIndex)
// are found in both its files: the shared index, sharedindex.<id>, which
// holds what was there when it was split, and the index itself, which
// holds what changed since. Each gitlinked repository in node_modules is
// handled as one the walk found.
func TestSplitIndexGitlinks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := gitIn(t, dir)
	sha := "0123456789abcdef0123456789abcdef01234567"
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "README"), nil, 0o644)
	git("add", "README")
	git("update-index", "--add", "--cacheinfo", "160000,"+sha+",node_modules/old")
	git("update-index", "--split-index")
	git("update-index", "--add", "--cacheinfo", "160000,"+sha+",node_modules/new")
	d := gitTree()
	files, _ := filepath.Glob(filepath.Join(dir, ".git/sharedindex.*"))
	if len(files) == 0 {
		t.Fatal("git made no shared index")
	}
	for _, f := range append(files, filepath.Join(dir, ".git/index")) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d["srv/proj/.git/"+filepath.Base(f)] = node(0o644, 1000, 1000, string(data))
	}
	if l := links([]byte(d["srv/proj/.git/index"].Data)); slices.Contains(l, "node_modules/old") {
		t.Fatalf("the split index itself holds the old gitlink (%q): the test proves nothing", l)
	}
	for _, m := range []string{"old", "new"} {
		d["srv/proj/node_modules/"+m+"/.git/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
		d["srv/proj/node_modules/"+m+"/.git/config"] = node(0o644, 1000, 1000, "[core]\n")
	}
	p := gitPolicy(t)
	got := formatProtection(findProtected(d, WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, nil))
	for _, m := range []string{"old", "new"} {
		if want := "read-only /srv/proj/node_modules/" + m + "/.git/config\n"; !strings.Contains(got, want) {
			t.Errorf("the protection lacks %q:\n%s", want, got)
		}
	}
}

// findIn is what the search of gitPolicy's roots finds on d.
func findIn(t *testing.T, d fstest.MapFS) string {
	p := gitPolicy(t)
	return formatProtection(findProtected(d, WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, nil))
}

// repoAt adds a repository's git directory (HEAD and config) at dir/.git.
func repoAt(d fstest.MapFS, dir string) {
	d[dir+"/.git/HEAD"] = node(0o644, 1000, 1000, "ref: refs/heads/main\n")
	d[dir+"/.git/config"] = node(0o644, 1000, 1000, "[core]\n")
}

// TestIndexHostileShapes: the index shapes git reads that an agent can
// write, each hiding a gitlink into node_modules from a reader that
// follows the format less closely than git does, or costing the next
// launch without bound.
func TestIndexHostileShapes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	sha := "0123456789abcdef0123456789abcdef01234567"
	blob := "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	// An index of git's own making, in a fresh repository.
	index := func(format string, cmds ...[]string) (dir string) {
		dir = t.TempDir()
		git := gitIn(t, dir)
		git("init", "-q", "--object-format="+format)
		for _, c := range cmds {
			git(c...)
		}
		return dir
	}
	load := func(d fstest.MapFS, from, to string) {
		files, _ := filepath.Glob(filepath.Join(from, ".git", "*index*"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			d[to+"/.git/"+filepath.Base(f)] = node(0o644, 1000, 1000, string(data))
		}
	}
	protects := func(t *testing.T, d fstest.MapFS, repo string) {
		t.Helper()
		if got, want := findIn(t, d), "read-only /srv/proj/"+repo+"/.git/config\n"; !strings.Contains(got, want) {
			t.Errorf("the protection lacks %q:\n%s", want, got)
		}
	}

	t.Run("a split index's entry made a gitlink", func(t *testing.T) {
		dir := index("sha1", []string{"update-index", "--add", "--cacheinfo", "100644," + blob + ",node_modules/x"},
			[]string{"update-index", "--split-index"},
			[]string{"update-index", "--cacheinfo", "160000," + sha + ",node_modules/x"})
		d := gitTree()
		load(d, dir, "srv/proj")
		repoAt(d, "srv/proj/node_modules/x")
		protects(t, d, "node_modules/x")
	})
	t.Run("extended flags in a version 2 index", func(t *testing.T) {
		// A first entry whose name's length puts its end elsewhere with
		// two bytes more (1, modulo 8).
		dir := index("sha1", []string{"update-index", "--add", "--cacheinfo", "100644," + blob + ",a"},
			[]string{"update-index", "--add", "--cacheinfo", "160000," + sha + ",node_modules/x"},
			[]string{"update-index", "--index-version", "2"})
		data, _ := os.ReadFile(filepath.Join(dir, ".git/index"))
		d := gitTree()
		d["srv/proj/.git/index"] = node(0o644, 1000, 1000, string(withExtendedFlags(data)))
		repoAt(d, "srv/proj/node_modules/x")
		protects(t, d, "node_modules/x")
	})
	t.Run("a submodule of a repository in node_modules", func(t *testing.T) {
		top := index("sha1", []string{"update-index", "--add", "--cacheinfo", "160000," + sha + ",node_modules/x"})
		inner := index("sha1", []string{"update-index", "--add", "--cacheinfo", "160000," + sha + ",y"})
		d := gitTree()
		load(d, top, "srv/proj")
		repoAt(d, "srv/proj/node_modules/x")
		load(d, inner, "srv/proj/node_modules/x")
		repoAt(d, "srv/proj/node_modules/x/y")
		protects(t, d, "node_modules/x/y")
	})
	t.Run("SHA-256 object ids", func(t *testing.T) {
		sha256 := strings.Repeat("ab", 32)
		dir := index("sha256", []string{"update-index", "--add", "--cacheinfo", "160000," + sha256 + ",node_modules/x"})
		d := gitTree()
		load(d, dir, "srv/proj")
		d["srv/proj/.git/config"] = node(0o644, 1000, 1000, "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n")
		repoAt(d, "srv/proj/node_modules/x")
		protects(t, d, "node_modules/x")
	})
	t.Run("a long name repeated by version 4", func(t *testing.T) {
		// 20 000 entries of a few bytes each, every one a 4000-byte
		// gitlink, each another (its last digits changed): bounded, and
		// said with a fix that keeps the project.
		long := "node_modules/" + strings.Repeat("x", 4000)
		data := []byte("DIRC\x00\x00\x00\x04")
		data = binary.BigEndian.AppendUint32(data, 20000)
		prev := ""
		for i := range 20000 {
			e := make([]byte, 62)
			binary.BigEndian.PutUint32(e[24:28], 0o160000)
			binary.BigEndian.PutUint16(e[60:62], 0xfff)
			suffix := fmt.Sprint(i)
			if i == 0 {
				e = append(append(e, 0), long+suffix...)
			} else {
				e = append(append(e, byte(len(prev))), suffix...)
			}
			prev = suffix
			data = append(append(data, e...), 0)
		}
		d := gitTree()
		d["srv/proj/.git/index"] = node(0o644, 1000, 1000, string(data))
		if got := findIn(t, d); !strings.Contains(got, "the git index /srv/proj/.git/index names more than 10000 submodules") || !strings.Contains(got, "rm -f /srv/proj/.git/index /srv/proj/.git/sharedindex.*; git reset") {
			t.Errorf("no error says the index names too many, with the fix:\n%.2000s", got)
		}
	})
}

// withExtendedFlags is a version 2 index whose first entry has the
// extended flag set and two bytes of extended flags, as git reads them in
// any version.
func withExtendedFlags(data []byte) []byte {
	flags := binary.BigEndian.Uint16(data[12+60 : 12+62])
	l := int(flags & 0xfff)
	size := (62 + l + 8) &^ 7
	e := append([]byte(nil), data[12:12+62]...)
	binary.BigEndian.PutUint16(e[60:62], flags|0x4000)
	e = append(e, 0, 0)
	e = append(e, data[12+62:12+62+l]...)
	e = append(e, make([]byte, (64+l+8)&^7-len(e))...)
	return append(append(append([]byte(nil), data[:12]...), e...), data[12+size:]...)
}

package hostfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/internal/testutil"
)

// tree makes, under a fresh directory T:
//
//	T/real/w/            the writable root
//	T/real/w/sub/
//	T/real/w/out      -> T/victim       a link the agent planted
//	T/real/w/up       -> ..             another
//	T/victim/file
//	T/op              -> real           the operator's links
//	T/op-file         -> victim/file
//	T/op-sub          -> real/w/sub
//	T/op-out          -> real/w/out
//	T/op-escape       -> real/w/../../victim
func tree(t *testing.T) (string, Walker) {
	t.Helper()
	T, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real/w/sub", "victim"} {
		os.MkdirAll(filepath.Join(T, d), 0o755)
	}
	os.WriteFile(filepath.Join(T, "victim/file"), []byte("victim"), 0o644)
	for link, target := range map[string]string{
		"real/w/out": filepath.Join(T, "victim"), "real/w/up": "..",
		"op": "real", "op-file": "victim/file", "op-sub": "real/w/sub", "op-out": "real/w/out",
		"op-escape": "real/w/../../victim",
	} {
		if err := os.Symlink(target, filepath.Join(T, link)); err != nil {
			t.Fatal(err)
		}
	}
	return T, Walker{Roots: []string{filepath.Join(T, "real/w")}}
}

// withoutOpenat2 runs f as on a kernel before Linux 5.6, and fails unless
// the walk asked for openat2 and went on without it.
func withoutOpenat2(t *testing.T, f func(t *testing.T)) {
	calls := 0
	openat2 = func(int, string, *unix.OpenHow) (int, error) { calls++; return -1, unix.ENOSYS }
	defer func() { openat2 = unix.Openat2 }()
	f(t)
	if calls == 0 {
		t.Error("openat2 was never tried: the fallback was not exercised")
	}
}

// TestWalker: links above the writable roots are followed, links below
// one never are, with openat2 and with the per-component fallback. Not
// parallel: the fallback replaces openat2 for the package.
func TestWalker(t *testing.T) {
	check := func(t *testing.T) {
		T, w := tree(t)
		j := func(p string) string { return filepath.Join(T, p) }
		for _, c := range []struct {
			path, want string // want: the Dir's path, or the error's sentinel
			beneath    bool
		}{
			{"op/w/sub", j("real/w/sub"), true},
			{"op-sub", j("real/w/sub"), true},
			{"real/w", j("real/w"), true},
			{"victim", j("victim"), false},
			{"real/w/out", "link", false},
			{"real/w/out/", "link", false},
			{"op/w/out", "link", false},
			{"op-out", "link", false},
			{"real/w/up/victim", "link", false},
			{"op-escape", "outside", false},
			{"real/w/missing", "not exist", false},
		} {
			d, err := w.Dir(j(c.path))
			switch {
			case c.want == "link" && !errors.Is(err, ErrLink),
				c.want == "outside" && !errors.Is(err, ErrOutside),
				c.want == "not exist" && !errors.Is(err, os.ErrNotExist):
				t.Errorf("Dir(%s): %v, want %s", c.path, err, c.want)
			case strings.HasPrefix(c.want, "/") && (err != nil || d.Path != c.want || d.Beneath != c.beneath):
				t.Errorf("Dir(%s): %+v %v, want %s (beneath %v)", c.path, d, err, c.want, c.beneath)
			}
			if d != nil {
				if st, err := d.Stat(); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
					t.Errorf("Dir(%s) holds no directory: %v", c.path, err)
				}
				d.Close()
			}
		}

		for _, c := range []struct{ path, dir, name, err string }{
			{"real/w/out", j("real/w"), "out", ""}, // the planted link itself, to be replaced
			{"op-out", j("real/w"), "out", ""},     // reached through the operator's link
			{"op-file", j("victim"), "file", ""},   // the operator's link is followed
			{"real/w/new.json", j("real/w"), "new.json", ""},
			{"real/w/out/run.json", "", "", "link"},
			{"real/w/sub/../out/run.json", "", "", "link"}, // cleaned first: real/w/out/run.json
			{"real/missing/run.json", "", "", "not exist"},
		} {
			d, name, err := w.Parent(j(c.path))
			if c.err != "" {
				if err == nil || c.err == "link" && !errors.Is(err, ErrLink) {
					t.Errorf("Parent(%s): %v, want %s", c.path, err, c.err)
				}
				continue
			}
			if err != nil || d.Path != c.dir || name != c.name {
				t.Errorf("Parent(%s) = %+v %q %v, want %s %s", c.path, d, name, err, c.dir, c.name)
			}
			d.Close()
		}

		if _, err := Strict.Dir(j("op/w/sub")); !errors.Is(err, ErrLink) {
			t.Errorf("Strict followed the operator's link: %v", err)
		}
		if d, err := Strict.Dir(j("real/w/sub")); err != nil {
			t.Errorf("Strict on a path without links: %v", err)
		} else {
			d.Close()
		}

		d, err := w.MkdirAll(j("op/w/new/deeper"), 0o700)
		if err != nil || d.Path != j("real/w/new/deeper") {
			t.Errorf("MkdirAll: %+v %v", d, err)
		} else if fi, err := os.Lstat(j("real/w/new/deeper")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("MkdirAll made %v %v", fi, err)
		}
		d.Close()
		if _, err := w.MkdirAll(j("real/w/out/new"), 0o700); !errors.Is(err, ErrLink) {
			t.Errorf("MkdirAll through a planted link: %v", err)
		}
		if _, err := os.Lstat(j("victim/new")); err == nil {
			t.Error("MkdirAll made a directory through the planted link")
		}
		d, err = w.MkdirAll(j("outside/made"), 0o700) // above the roots
		if err != nil {
			t.Errorf("MkdirAll above the roots: %v", err)
		}
		d.Close()

		root, _ := w.Dir(j("real/w"))
		defer root.Close()
		if _, err := root.MkdirAll("out/x", 0o700, -1, -1); !errors.Is(err, ErrLink) {
			t.Errorf("Dir.MkdirAll through a planted link: %v", err)
		}
		if _, err := root.MkdirAll("../x", 0o700, -1, -1); !errors.Is(err, ErrOutside) {
			t.Errorf("Dir.MkdirAll out of the directory: %v", err)
		}
	}
	t.Run("openat2", check)
	t.Run("per-component fallback", func(t *testing.T) { withoutOpenat2(t, check) })
}

// TestReplace: the name is replaced, never followed; outside the roots the
// replaced file's mode is kept, inside it is not.
func TestReplace(t *testing.T) {
	t.Parallel()
	T, w := tree(t)
	root, err := w.Dir(filepath.Join(T, "real/w"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// A link to the victim: replaced by the data, the victim untouched.
	if err := root.Replace("out", []byte("record")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(T, "victim/file")); string(b) != "victim" {
		t.Errorf("the victim changed: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(T, "real/w/out"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("out after Replace: %v %v", fi, err)
	}
	// A file planted there, world-writable: a new file takes its name.
	planted := filepath.Join(T, "real/w/planted")
	os.WriteFile(planted, []byte("agent's"), 0o666)
	os.Chmod(planted, 0o666)
	before, _ := os.Lstat(planted)
	if err := root.Replace("planted", []byte("record")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Lstat(planted)
	if b, _ := os.ReadFile(planted); string(b) != "record" || os.SameFile(before, after) || after.Mode().Perm() != 0o600 {
		t.Errorf("planted: %q, same inode %v, mode %v", b, os.SameFile(before, after), after.Mode())
	}
	if err := root.Replace("sub", []byte("x")); err == nil {
		t.Error("Replace put a file over a directory")
	}
	// Outside the roots: the operator's file keeps its mode.
	vic, _ := w.Dir(filepath.Join(T, "victim"))
	defer vic.Close()
	os.Chmod(filepath.Join(T, "victim/file"), 0o640)
	if err := vic.Replace("file", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(T, "victim/file")); fi.Mode().Perm() != 0o640 {
		t.Errorf("the operator's file lost its mode: %v", fi.Mode())
	}
	for _, dir := range []string{"real/w", "victim"} {
		if left, _ := filepath.Glob(filepath.Join(T, dir, ".agentjail-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

// TestAddNew: a taken name, whether a file or a link, gets a new one, also
// where the file system lacks RENAME_NOREPLACE (link(2) then). Not
// parallel: that replaces renameat2 for the package.
func TestAddNew(t *testing.T) {
	t.Run("RENAME_NOREPLACE", testAddNew)
	t.Run("link", func(t *testing.T) {
		calls := 0
		renameat2 = func(int, string, int, string, uint) error { calls++; return unix.EINVAL }
		defer func() { renameat2 = unix.Renameat2 }()
		testAddNew(t)
		if calls == 0 {
			t.Error("renameat2 was never tried: the fallback was not exercised")
		}
	})
}

func testAddNew(t *testing.T) {
	T, w := tree(t)
	root, _ := w.Dir(filepath.Join(T, "real/w"))
	defer root.Close()
	os.WriteFile(filepath.Join(T, "real/w/s.jsonl"), []byte("earlier run"), 0o600)
	os.Symlink(filepath.Join(T, "victim/file"), filepath.Join(T, "real/w/s.1.jsonl"))
	for _, want := range []string{"s.2.jsonl", "s.3.jsonl"} {
		got, err := root.AddNew("s.jsonl", strings.NewReader(want), 0o600, -1, -1)
		if err != nil || got != want {
			t.Errorf("AddNew = %q %v, want %s", got, err, want)
		}
		if b, _ := os.ReadFile(filepath.Join(T, "real/w", want)); string(b) != want {
			t.Errorf("%s holds %q", want, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(T, "real/w/s.jsonl")); string(b) != "earlier run" {
		t.Errorf("an earlier transcript was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(T, "victim/file")); string(b) != "victim" {
		t.Errorf("written through a link: %q", b)
	}
	if got, err := root.AddNew("fresh", strings.NewReader(""), 0o600, -1, -1); err != nil || got != "fresh" {
		t.Errorf("a free name: %q %v", got, err)
	}
	if left, _ := filepath.Glob(filepath.Join(T, "real/w/.agentjail-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestOpenAppend: in a writable root only a plain file of agentjail's own
// is appended to; a fifo is refused without blocking.
func TestOpenAppend(t *testing.T) {
	t.Parallel()
	T, w := tree(t)
	root, _ := w.Dir(filepath.Join(T, "real/w"))
	defer root.Close()
	syscall.Mkfifo(filepath.Join(T, "real/w/fifo"), 0o600)
	os.WriteFile(filepath.Join(T, "real/w/own.log"), []byte("a\n"), 0o600)
	os.Link(filepath.Join(T, "real/w/own.log"), filepath.Join(T, "real/w/hard.log"))
	os.WriteFile(filepath.Join(T, "real/w/other.log"), nil, 0o600)
	uid := os.Geteuid()
	bad := map[string]error{"out": ErrLink, "fifo": ErrNotOwn, "own.log": ErrNotOwn, "hard.log": ErrNotOwn, "sub": nil}
	if uid == 0 {
		os.Chown(filepath.Join(T, "real/w/other.log"), 1000, 1000)
		bad["other.log"] = ErrNotOwn
	}
	for name, want := range bad {
		f, err := root.OpenAppend(name, uid)
		if err == nil || want != nil && !errors.Is(err, want) {
			t.Errorf("OpenAppend(%s): %v, want %v", name, err, want)
		}
		if f != nil {
			f.Close()
		}
	}
	os.Remove(filepath.Join(T, "real/w/hard.log"))
	for _, name := range []string{"own.log", "new.log"} {
		f, err := root.OpenAppend(name, uid)
		if err != nil {
			t.Fatalf("OpenAppend(%s): %v", name, err)
		}
		f.WriteString("b\n")
		f.Close()
	}
	if b, _ := os.ReadFile(filepath.Join(T, "real/w/own.log")); string(b) != "a\nb\n" {
		t.Errorf("own.log: %q", b)
	}
	// Outside the roots the operator's link is followed.
	op, _ := w.Dir(T)
	defer op.Close()
	f, err := op.OpenAppend("op-file", uid)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("+")
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(T, "victim/file")); string(b) != "victim+" {
		t.Errorf("the operator's link: %q", b)
	}
}

// TestMkdirAllOwner: directories made below a Dir are given to the owner
// asked for, by descriptor.
func TestMkdirAllOwner(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	T, w := tree(t)
	root, _ := w.Dir(filepath.Join(T, "real/w"))
	defer root.Close()
	d, err := root.MkdirAll("s1/subagents", 0o700, 1000, 1001)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []string{"s1", "s1/subagents"} {
		fi, _ := os.Lstat(filepath.Join(T, "real/w", p))
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1000 || st.Gid != 1001 || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %d:%d %v", p, st.Uid, st.Gid, fi.Mode())
		}
	}
}

// TestParentOfDescriptor: /dev/stderr and a shell's >(...) name a
// descriptor, not a path; the log opened through one writes to it.
func TestParentOfDescriptor(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	d, name, err := Walker{}.Parent(fmt.Sprintf("/dev/fd/%d", w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if want := fmt.Sprintf("/proc/%d/fd", os.Getpid()); d.Path != want || name != strconv.Itoa(int(w.Fd())) {
		t.Errorf("Parent = %s %s, want %s", d.Path, name, want)
	}
	f, err := d.OpenAppend(name, os.Geteuid())
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("logged")
	f.Close()
	w.Close()
	if b, _ := io.ReadAll(r); string(b) != "logged" {
		t.Errorf("the pipe got %q", b)
	}
}

// TestForeignLinks: outside this run's writable roots a link is followed
// only when it is the operator's. An earlier run with other roots could
// have written T/earlier: its agent's link there (owned by the run user)
// is not followed, nor root's own link in a directory others may write,
// while root's link in a sticky directory is.
func TestForeignLinks(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	T, w := tree(t)
	j := func(p string) string { return filepath.Join(T, p) }
	os.Chmod(T, 0o755)
	for d, mode := range map[string]os.FileMode{"earlier": 0o755, "shared": 0o777, "sticky": 0o777 | os.ModeSticky} {
		os.Mkdir(j(d), 0o755)
		os.Chmod(j(d), mode)
		for _, name := range []string{"agent.log", "dir"} {
			target := j("victim/file")
			if name == "dir" {
				target = j("victim")
			}
			os.Symlink(target, j(d+"/"+name))
		}
	}
	os.Chown(j("earlier"), 1000, 1000)
	os.Lchown(j("earlier/agent.log"), 1000, 1000)
	os.Lchown(j("earlier/dir"), 1000, 1000)
	for _, c := range []struct {
		path    string
		foreign bool
	}{
		{"earlier/agent.log", true},
		{"earlier/dir/run.json", true},
		{"shared/agent.log", true},
		{"shared/dir/run.json", true},
		{"sticky/agent.log", false},
		{"sticky/dir/run.json", false},
	} {
		d, name, err := w.Parent(j(c.path))
		if c.foreign != errors.Is(err, ErrForeignLink) || !c.foreign && (err != nil || d.Path != j("victim")) {
			t.Errorf("Parent(%s) = %+v %q %v; foreign: %v", c.path, d, name, err, c.foreign)
		}
		d.Close()
	}
	// The name itself, met in a directory already open.
	for _, c := range []struct {
		dir     string
		foreign bool
	}{{"earlier", true}, {"shared", true}, {"sticky", false}} {
		d, err := w.Dir(j(c.dir))
		if err != nil {
			t.Fatal(err)
		}
		f, err := d.OpenAppend("agent.log", os.Geteuid())
		if c.foreign != errors.Is(err, ErrForeignLink) {
			t.Errorf("OpenAppend(%s/agent.log): %v; foreign: %v", c.dir, err, c.foreign)
		}
		if f != nil {
			f.Close()
		}
		d.Close()
	}
	if b, _ := os.ReadFile(j("victim/file")); string(b) != "victim" {
		t.Errorf("the victim changed: %q", b)
	}
}

// TestParentPastPathMax: a .git an agent made below PATH_MAX's reach was
// reported but not moved aside ("file name too long"): the walk to it is
// made a component at a time now.
func TestParentPastPathMax(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	name := strings.Repeat("d", 200)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	deep := root
	for range 25 { // 5 KB of path
		unix.Mkdirat(fd, name, 0o755)
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd, deep = next, deep+"/"+name
	}
	unix.Mkdirat(fd, ".git", 0o755)
	unix.Close(fd)
	d, base, err := Walker{Roots: []string{root}}.Parent(deep + "/.git")
	if err != nil {
		t.Fatalf("Parent of a path of %d bytes: %v", len(deep), err)
	}
	defer d.Close()
	if _, err := d.MoveAside(base, ".aside"); err != nil || base != ".git" {
		t.Errorf("moving %s aside: %v", base, err)
	}
}

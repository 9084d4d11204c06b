package hostfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestCopy: a tree is copied from descriptors. Below a writable root a
// link at the source or on the way to it is refused (an agent's, planted
// in a home given as a writable root, to have root copy a root-only file
// to it), as is a file with another name; inside the tree links are copied
// as links, FIFOs skipped; the budget bounds files and bytes.
func TestCopy(t *testing.T) {
	t.Parallel()
	T, w := tree(t)
	j := func(p string) string { return filepath.Join(T, p) }
	os.MkdirAll(j("real/w/home/.aws/sub"), 0o750)
	os.WriteFile(j("real/w/home/.aws/config"), []byte("cfg"), 0o640)
	os.WriteFile(j("real/w/home/.aws/sub/x"), []byte("x"), 0o600)
	os.Symlink("config", j("real/w/home/.aws/link"))
	syscall.Mkfifo(j("real/w/home/.aws/fifo"), 0o600)
	os.Symlink(j("victim"), j("real/w/home/.kube"))
	os.Symlink(j("victim/file"), j("real/w/home/.claude.json"))
	os.Symlink(j("real/w/home"), j("real/w/h"))
	os.MkdirAll(j("real/w/home/.ssh"), 0o700)
	os.Link(j("victim/file"), j("real/w/home/.ssh/id_rsa"))
	out := t.TempDir()

	made, err := w.Copy(j("op/w/home/.aws"), filepath.Join(out, "aws"), &Budget{Entries: 10, Bytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range made {
		got = append(got, strings.TrimPrefix(m, out+"/"))
	}
	if got[0] != "aws" || len(got) != 5 { // the rest in the directory's order
		t.Errorf("made %v", got)
	}
	slices.Sort(got)
	if strings.Join(got, " ") != "aws aws/config aws/link aws/sub aws/sub/x" {
		t.Errorf("made %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "aws/config")); string(b) != "cfg" {
		t.Errorf("config: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(out, "aws/config")); fi.Mode().Perm() != 0o640 {
		t.Errorf("config: %v", fi.Mode())
	}
	if fi, _ := os.Lstat(filepath.Join(out, "aws")); fi.Mode().Perm() != 0o750 {
		t.Errorf("aws: %v", fi.Mode())
	}
	if l, _ := os.Readlink(filepath.Join(out, "aws/link")); l != "config" {
		t.Errorf("the link: %q", l)
	}

	for _, c := range []struct {
		src  string
		want error
	}{
		{"real/w/home/.kube", ErrLink},
		{"real/w/home/.claude.json", ErrLink},
		{"real/w/h/.aws", ErrLink},
		{"real/w/home/.ssh", ErrNotOwn},
	} {
		dst := filepath.Join(out, filepath.Base(c.src))
		if _, err := w.Copy(j(c.src), dst, &Budget{Entries: 10, Bytes: 100}); !errors.Is(err, c.want) {
			t.Errorf("Copy(%s): %v, want %v", c.src, err, c.want)
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "file")); len(b) > 0 {
			t.Errorf("Copy(%s) copied the victim", c.src)
		}
	}
	for _, b := range []Budget{{Entries: 4, Bytes: 100}, {Entries: 10, Bytes: 3}} {
		if _, err := w.Copy(j("real/w/home/.aws"), filepath.Join(out, "aws2"), &b); !errors.Is(err, ErrTooLarge) {
			t.Errorf("budget %+v: %v", b, err)
		}
		os.RemoveAll(filepath.Join(out, "aws2"))
	}
	// Above the roots the operator's own link is followed.
	if _, err := w.Copy(j("op-file"), filepath.Join(out, "op-file"), &Budget{Entries: 1, Bytes: 100}); err != nil {
		t.Errorf("the operator's link: %v", err)
	}
}

//go:build linux && cgo

package seccomp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// allowAll is a seccomp program that allows every system call: what a
// planted entry would hand the jail.
var allowAll = []byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}

// TestCacheStoresAndReadsBack: a filter compiled once is read back the
// next time, byte for byte, and only for exactly that filter.
func TestCacheStoresAndReadsBack(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "seccomp")
	c, why := OpenCache(dir, nil)
	if c == nil {
		t.Fatal(why)
	}
	defer c.Close()
	f := Builtin(false)
	want, err := Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Compile(f)
	if err != nil || !bytes.Equal(first, want) {
		t.Fatalf("first compile: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(entries))
	}
	// The stored entry is what the next run reads: change its program and
	// the change shows, so a read-back really happens.
	p := filepath.Join(dir, entries[0].Name())
	data, _ := os.ReadFile(p)
	header, _, _ := bytes.Cut(data, []byte("\n"))
	os.WriteFile(p, append(append(header, '\n'), allowAll...), 0o600)
	if got, _ := c.Compile(f); !bytes.Equal(got, allowAll) {
		t.Fatal("the cache did not read its own entry back")
	}
	// Another filter misses the entry.
	sealed := Builtin(true)
	if got, _ := c.Compile(sealed); bytes.Equal(got, allowAll) {
		t.Error("the sealed filter was served the free filter's entry")
	}
}

// TestCacheRefusesWhatItCannotTrust: entries that are links, another
// user's, writable by others or hard-linked are compiled afresh; a cache
// directory under a writable root, or writable by others, is not used.
func TestCacheRefusesWhatItCannotTrust(t *testing.T) {
	t.Parallel()
	f := Builtin(false)
	want, _ := Compile(f)
	planted := func(t *testing.T, plant func(dir, name string, data []byte)) []byte {
		dir := filepath.Join(t.TempDir(), "seccomp")
		c, why := OpenCache(dir, nil)
		if c == nil {
			t.Fatal(why)
		}
		defer c.Close()
		c.Compile(f)
		entries, _ := os.ReadDir(dir)
		name := entries[0].Name()
		data, _ := os.ReadFile(filepath.Join(dir, name))
		header, _, _ := bytes.Cut(data, []byte("\n"))
		os.Remove(filepath.Join(dir, name))
		plant(dir, name, append(append(header, '\n'), allowAll...))
		got, err := c.Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for name, plant := range map[string]func(dir, name string, data []byte){
		"a symlink": func(dir, name string, data []byte) {
			elsewhere := filepath.Join(filepath.Dir(dir), "elsewhere")
			os.WriteFile(elsewhere, data, 0o600)
			os.Symlink(elsewhere, filepath.Join(dir, name))
		},
		"writable by others": func(dir, name string, data []byte) {
			os.WriteFile(filepath.Join(dir, name), data, 0o666)
			os.Chmod(filepath.Join(dir, name), 0o666)
		},
		"a hard link": func(dir, name string, data []byte) {
			elsewhere := filepath.Join(filepath.Dir(dir), "elsewhere")
			os.WriteFile(elsewhere, data, 0o600)
			os.Link(elsewhere, filepath.Join(dir, name))
		},
		"a fifo": func(dir, name string, data []byte) {
			mkfifo(filepath.Join(dir, name))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := planted(t, plant); !bytes.Equal(got, want) {
				t.Error("a planted entry was loaded")
			}
		})
	}
	t.Run("another user's", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs root to own a file as another user (make test runs as root)")
		}
		got := planted(t, func(dir, name string, data []byte) {
			p := filepath.Join(dir, name)
			os.WriteFile(p, data, 0o600)
			os.Chown(p, 1000, 1000)
		})
		if !bytes.Equal(got, want) {
			t.Error("another user's entry was loaded")
		}
	})

	root := t.TempDir()
	if c, why := OpenCache(filepath.Join(root, "proj", "seccomp"), []string{filepath.Join(root, "proj")}); c != nil || !strings.Contains(why, "writable root") {
		t.Errorf("a cache under a writable root: %v, %q", c, why)
	}
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if c, why := OpenCache(open, nil); c != nil || !strings.Contains(why, "alone") {
		t.Errorf("a cache others may write: %v, %q", c, why)
	}
	shared := filepath.Join(root, "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	if c, why := OpenCache(filepath.Join(shared, "seccomp"), nil); c != nil || !strings.Contains(why, "writable by others") {
		t.Errorf("a cache in a directory others may write: %v, %q", c, why)
	}
}

func mkfifo(p string) { unix.Mkfifo(p, 0o600) }

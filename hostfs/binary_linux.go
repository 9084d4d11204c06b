package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// PublicExecutable returns a path to the agentjail binary exe that any run
// user can open, for bwrap to bind as the exec stage, and the hold that
// keeps it there: close it when the run has ended (nil when exe itself is
// returned). bwrap runs as the run user and opens bind sources with that
// user's permissions, so a binary under a private directory (/root/go/bin)
// is first copied into dir (root-owned, 0755), once per binary: the name
// carries its inode, size and mtime.
//
// Each rebuild or upgrade would add a copy, on a RAM-backed /run, so every
// call also removes the copies no run holds but the one it returns. A run
// holds its copy with a shared flock(2) from before bwrap can bind it by
// path until it ends; the pruner removes a copy only while it holds an
// exclusive flock on it, taken without waiting, after checking that the
// name still leads to the locked file. A copy is only ever created with
// link(2), which never replaces a name: so a name, once it leads to a
// file, leads to that file until a pruner holding it removes it, and a
// holder that finds its name gone (ENOENT, or another file) copies again.
func PublicExecutable(exe, dir string) (string, *os.File, error) {
	st, err := os.Stat(exe)
	if err != nil {
		return "", nil, err
	}
	if readableByAll(exe) {
		pruneCopies(dir, "")
		return exe, nil, nil
	}
	sys := st.Sys().(*syscall.Stat_t)
	name := fmt.Sprintf("agentjail-%d-%d-%d", sys.Ino, st.Size(), st.ModTime().UnixNano())
	public := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("copy the exec stage binary: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", nil, err
	}
	for {
		hold, err := LockEntry(public, os.O_RDONLY, unix.LOCK_SH)
		if err == nil {
			pruneCopies(dir, name)
			return public, hold, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("copy the exec stage binary: %w", err)
		}
		if err := copyExecutable(exe, public); err != nil {
			return "", nil, fmt.Errorf("copy the exec stage binary into %s: %w", dir, err)
		}
	}
}

// copyExecutable copies exe to target (mode 0755) unless target exists. The
// temporary copy is flocked while it is written, so that a concurrent
// pruner leaves it alone, and a SIGKILLed copy is pruned by the next run.
func copyExecutable(exe, target string) error {
	tmp, err := os.CreateTemp(filepath.Dir(target), ".agentjail-*")
	if err != nil {
		return err
	}
	tmp.Close()
	// A pruner may remove the fresh file before it is locked: lockEntry
	// then makes it anew under the same name.
	dst, err := LockEntry(tmp.Name(), os.O_RDWR|os.O_CREATE, unix.LOCK_EX)
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	src, err := os.Open(exe)
	if err == nil {
		_, err = io.Copy(dst, src)
		src.Close()
	}
	if err == nil {
		err = dst.Chmod(0o755)
	}
	if err == nil {
		// link, not rename: an existing copy (a concurrent run's, maybe
		// held already) is never replaced.
		if err = os.Link(tmp.Name(), target); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	os.Remove(tmp.Name()) // while still locked
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// pruneCopies removes from dir every copy PublicExecutable made, and every
// temporary one, but keep, that no run holds. Failures are left for the
// next run: they cost only space.
func pruneCopies(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if n == keep || !strings.HasPrefix(strings.TrimPrefix(n, "."), "agentjail-") {
			continue
		}
		p := filepath.Join(dir, n)
		f, err := os.Open(p)
		if err != nil {
			continue // another pruner removed it
		}
		var held, now unix.Stat_t
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil &&
			unix.Fstat(int(f.Fd()), &held) == nil && unix.Lstat(p, &now) == nil && held.Ino == now.Ino {
			os.Remove(p)
		}
		f.Close()
	}
}

// readableByAll reports whether every directory above p is searchable and p
// readable and executable by others, judged from mode bits.
func readableByAll(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm()&0o005 != 0o005 {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

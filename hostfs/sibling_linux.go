package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sibling opens the binary name next to the running executable (the real
// one: os.Executable resolves symlinks), or returns why it is not used:
// an error that wraps fs.ErrNotExist when there is none. It runs as PID 1
// or inside every jail (agentjail-init, agentjail-exec), so it must be
// what agentjail's owner put there: a regular executable file, not a
// symlink, in a directory, itself owned by root or agentjail's owner, that
// no one else can write (else a rename could swap it). It is opened once
// and checked through that descriptor; agentjail-init is executed through
// it, and the exec stage, which bwrap can only bind by its path, stays
// where only those two owners could swap it.
func Sibling(name string) (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find agentjail's own executable: %w", err)
	}
	return sibling(self, name)
}

// sibling is Sibling for the executable self.
func sibling(self, name string) (*os.File, error) {
	sfi, err := os.Stat(self)
	if err != nil {
		return nil, fmt.Errorf("cannot stat agentjail's own executable: %w", err)
	}
	dir := filepath.Dir(self)
	p := filepath.Join(dir, name)
	// Whether there is one comes first: a directory no one should trust
	// (agentjail run from /tmp) is only worth a word when it holds one.
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("no %s next to agentjail (in %s): %w", name, dir, fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	if err := trustworthy(f, dir, name, uidOf(sfi)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func uidOf(fi fs.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

// trustworthy says why f, the sibling name opened in dir, is not used, or
// returns nil: it trusts root and uid self, agentjail's owner.
func trustworthy(f *os.File, dir, name string, self uint32) error {
	trusted := func(fi fs.FileInfo) bool { return uidOf(fi) == 0 || uidOf(fi) == self }
	p := f.Name()
	dfi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("cannot stat %s: %w", dir, err)
	case !trusted(dfi) || dfi.Mode().Perm()&0o022 != 0:
		// %04o shows no sticky bit (Perm drops it): /tmp reads 0777.
		return fmt.Errorf("%s is owned by uid %d, mode %04o: someone other than root or agentjail's owner could put an %s there", dir, uidOf(dfi), dfi.Mode().Perm(), name)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", p, err)
	case fi.Mode()&fs.ModeSymlink != 0: // O_PATH|O_NOFOLLOW opens the link itself
		return fmt.Errorf("%s is a symlink; install the binary itself", p)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", p)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %04o)", p, fi.Mode().Perm())
	case !trusted(fi):
		return fmt.Errorf("%s is owned by uid %d, neither root nor agentjail's owner", p, uidOf(fi))
	}
	return nil
}

package hostfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// Budget bounds what copies take together: Entries (files, directories
// and links) and Bytes (of file content).
type Budget struct {
	Entries int
	Bytes   int64
	entries int
	bytes   int64
}

func (b *Budget) take(p string, bytes int64) error {
	b.entries++
	b.bytes += bytes
	if b.entries > b.Entries || b.bytes > b.Bytes {
		return fmt.Errorf("%s: %w (at most %d files and %d bytes in all)", p, ErrTooLarge, b.Entries, b.Bytes)
	}
	return nil
}

// maxCopyDepth bounds how deep Copy descends: each level holds a
// descriptor.
const maxCopyDepth = 64

// Copy copies the file or directory tree p, reached through w, into dst, a
// new path in a directory of agentjail's own, within b, and returns what it
// made, parents first. Nothing is read through a path: p is opened as Open
// does (below a writable root a link at p or on the way to it is ErrLink),
// and every entry from its directory's descriptor (OpenAt, O_NOFOLLOW).
// Inside the tree a link is copied as a link, never followed, sockets,
// FIFOs and devices are skipped, and, below a writable root, a regular file
// with more than one name is refused (a hard link to another's file,
// ErrNotOwn). Files are made O_EXCL|O_NOFOLLOW and directories 0700, then
// given the mode of what they copy.
func (w Walker) Copy(p, dst string, b *Budget) ([]string, error) {
	d, name, err := w.Parent(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, st, err := d.Open(name, regularOrDir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var made []string
	err = copyTree(f, &st, path.Join(d.Path, name), dst, d.Beneath, b, 0, &made)
	return made, err
}

func regularOrDir(st *unix.Stat_t) error {
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		return errors.New("not a regular file or a directory")
	}
	return nil
}

// copyTree copies f (status st, at src) to dst, as Copy.
func copyTree(f *os.File, st *unix.Stat_t, src, dst string, beneath bool, b *Budget, depth int, made *[]string) error {
	perm := os.FileMode(st.Mode & 0o777)
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		if beneath && st.Nlink != 1 {
			return fmt.Errorf("%s has %d hard links in a writable root: %w", src, st.Nlink, ErrNotOwn)
		}
		if err := b.take(src, st.Size); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		*made = append(*made, dst)
		_, err = io.Copy(out, io.LimitReader(f, st.Size))
		if err == nil {
			err = out.Chmod(perm)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if depth >= maxCopyDepth {
		return fmt.Errorf("%s: %w (more than %d directories deep)", src, ErrTooLarge, maxCopyDepth)
	}
	if err := b.take(src, 0); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	*made = append(*made, dst)
	dirfd := int(f.Fd())
	for {
		names, err := f.Readdirnames(256)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := copyEntry(dirfd, name, path.Join(src, name), path.Join(dst, name), beneath, b, depth, made); err != nil {
				return err
			}
		}
	}
	return os.Chmod(dst, perm)
}

// copyEntry copies name in the directory dirfd, as copyTree.
func copyEntry(dirfd int, name, src, dst string, beneath bool, b *Budget, depth int, made *[]string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: src, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if err := b.take(src, 0); err != nil {
			return err
		}
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err == nil {
			err = os.Symlink(string(buf[:n]), dst)
		}
		if err != nil {
			return &os.PathError{Op: "copy the link", Path: src, Err: err}
		}
		*made = append(*made, dst)
		return nil
	case unix.S_IFREG, unix.S_IFDIR:
		f, st, err := OpenAt(dirfd, name, true, regularOrDir)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		defer f.Close()
		return copyTree(f, &st, src, dst, beneath, b, depth+1, made)
	}
	return nil // a socket, a FIFO, a device: nothing to copy
}

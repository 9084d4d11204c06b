package launch

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
)

// hostDisk is the host's / as mounts reads it (Render, TakeSnapshot):
// like os.DirFS("/"), but a name may hold any bytes (a directory an agent
// named with bytes that are not UTF-8, which io/fs refuses, would hide
// what is below it from the search for protected paths and from the check
// after the run), and only regular files and directories are opened, a
// file as readInput opens its files (hostfs.OpenAt): mounts reads git
// files under the writable roots, which an agent (of a concurrent run on
// the same root) may swap for a FIFO or a device between the lstat and the
// open; os.Open would wait for a FIFO's writer for ever (fifo(7)), or run
// a device's open. Stat does not open at all.
type hostDisk struct{}

func newHostDisk() mounts.Disk { return hostDisk{} }

// validName is fs.ValidPath without its UTF-8 rule: "." or elements
// separated by single slashes, none empty, "." or "..".
func validName(name string) bool {
	if name == "." {
		return true
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}

// abs is name on the host, or an error for an invalid one.
func abs(op, name string) (string, error) {
	if !validName(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return "/", nil
	}
	return "/" + name, nil
}

func (hostDisk) Open(name string) (fs.File, error) {
	p, err := abs("open", name)
	if err != nil {
		return nil, err
	}
	// Most opens are of directories (the walk's): O_DIRECTORY fails on
	// anything else before any open of it runs (fs/namei.c, do_open), so
	// those take one call.
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		return f, nil
	case !errors.Is(err, unix.ENOTDIR):
		return nil, err
	}
	f, _, err = hostfs.OpenAt(unix.AT_FDCWD, p, false, func(st *unix.Stat_t) error {
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			return errors.New("not a regular file or a directory")
		}
		return nil
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

func (hostDisk) Stat(name string) (fs.FileInfo, error) {
	p, err := abs("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (hostDisk) Lstat(name string) (fs.FileInfo, error) {
	p, err := abs("lstat", name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

func (hostDisk) ReadLink(name string) (string, error) {
	p, err := abs("readlink", name)
	if err != nil {
		return "", err
	}
	return os.Readlink(p)
}

func (hostDisk) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := abs("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

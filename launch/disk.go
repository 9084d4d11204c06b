package launch

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
)

// hostDisk is the host's / as mounts reads it (Render, TakeSnapshot):
// os.DirFS("/"), except that only regular files and directories are
// opened, a file as readInput opens its files (hostfs.OpenAt): mounts reads
// git files under the writable roots, which an agent (of a concurrent run
// on the same root) may swap for a FIFO or a device between the lstat and
// the open; os.Open would wait for a FIFO's writer for ever (fifo(7)), or
// run a device's open. Stat does not open at all.
type hostDisk struct{ mounts.Disk }

func newHostDisk() mounts.Disk { return hostDisk{os.DirFS("/").(mounts.Disk)} }

func (hostDisk) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	// Most opens are of directories (the walk's): O_DIRECTORY fails on
	// anything else before any open of it runs (fs/namei.c, do_open), so
	// those take one call.
	f, err := os.OpenFile("/"+name, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		return f, nil
	case !errors.Is(err, unix.ENOTDIR):
		return nil, err
	}
	f, _, err = hostfs.OpenAt(unix.AT_FDCWD, "/"+name, false, func(st *unix.Stat_t) error {
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
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return os.Stat("/" + name)
}

package launch

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/agentjail/agentjail/mounts"
)

// hostDisk is the host's / as mounts reads it (Render, TakeSnapshot):
// os.DirFS("/"), except that files are opened without blocking. mounts
// reads git files under the writable roots, which an agent (of a
// concurrent run on the same root) may swap for a FIFO between the lstat
// and the open; os.Open would wait for a writer for ever (fifo(7)). Stat
// does not open at all: opening a device can have effects.
type hostDisk struct{ mounts.Disk }

func newHostDisk() mounts.Disk { return hostDisk{os.DirFS("/").(mounts.Disk)} }

func (hostDisk) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return os.OpenFile("/"+name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func (hostDisk) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return os.Stat("/" + name)
}

package hostfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// LockEntry opens name (with os.OpenFile's flag, mode 0600 if it creates
// it) and flocks it, retrying when the entry was unlinked between open and
// lock (another run removing it). Without os.O_CREATE, an entry that is
// gone is fs.ErrNotExist.
func LockEntry(name string, flag, how int) (*os.File, error) {
	for {
		f, err := os.OpenFile(name, flag, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, err
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(name, &now) == nil && held.Ino == now.Ino {
			return f, nil
		}
		f.Close()
	}
}

package hostfs

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// MoveAside renames name in d to name+suffix, in d and by its descriptor
// (renameat2(2) RENAME_NOREPLACE: nothing is followed, nothing replaced),
// and returns the new path.
func (d *Dir) MoveAside(name, suffix string) (string, error) {
	to := name + suffix
	if err := renameat2(d.fd(), name, d.fd(), to, unix.RENAME_NOREPLACE); err != nil {
		return "", fmt.Errorf("rename %s: %w", path.Join(d.Path, name), err)
	}
	return path.Join(d.Path, to), nil
}

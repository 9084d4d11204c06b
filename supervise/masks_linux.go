package supervise

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RemoveMasks deletes the empty files bwrap created on the host as mount
// points for masks (mounts.Plan.Masks), so a run leaves no placeholders.
// It never follows a symlink: the parent is opened with
// RESOLVE_NO_SYMLINKS and the entry is checked with AT_SYMLINK_NOFOLLOW.
// Anything that is not an empty regular file is left alone (someone wrote
// to it). Errors are collected, not fatal.
func RemoveMasks(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := removeEmptyFile(p); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove mask placeholder %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func removeEmptyFile(p string) error {
	dir, name := filepath.Split(p)
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 {
		return nil
	}
	return unix.Unlinkat(fd, name, 0)
}

package supervise

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// RunClock reads the clock file systems stamp change times with
// (current_time() in the kernel reads the coarse real-time clock), so that
// what a run changes has a ctime at or after it. Taken before the launch.
func RunClock() unix.Timespec {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts
}

// StripSetID walks the writable roots after a run and undoes what would
// make the run's files dangerous on the host, where the nosuid and nodev of
// the jail's mounts do not apply: it strips the set-user-id and
// set-group-id bits of regular files changed since the run started (a
// ctime at or after since; see changedSince), and removes device nodes
// made since then
// (an agent never holds CAP_MKNOD, so there should be none). Each is a
// violation. Files that were set-id before the run are left alone. Links
// are never followed: each file is reopened through openat2(2) with
// RESOLVE_NO_SYMLINKS and checked to be the one the walk saw.
func StripSetID(roots []string, since unix.Timespec) ([]Note, error) {
	var notes []Note
	var errs []error
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if p != root {
					errs = append(errs, err)
				}
				return nil
			}
			t := e.Type()
			if t&^(fs.ModeCharDevice|fs.ModeDevice) != 0 || e.IsDir() {
				return nil // links, directories, fifos, sockets
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil || !changedSince(st.Ctim, since) {
				return nil
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				if st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
					return nil
				}
				if err := stripOne(p, st); err != nil {
					errs = append(errs, err)
					return nil
				}
				notes = append(notes, setIDNote(p, st.Mode))
			case unix.S_IFCHR, unix.S_IFBLK:
				if st.Rdev == 0 {
					return nil // an overlayfs whiteout: opens nothing
				}
				if err := removeNode(p, st); err != nil {
					errs = append(errs, err)
					return nil
				}
				notes = append(notes, deviceNote(p, unix.Major(st.Rdev), unix.Minor(st.Rdev)))
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return notes, fmt.Errorf("set-id scan of the writable roots: %w", errors.Join(errs...))
	}
	return notes, nil
}

// changedSince reports whether a change time is at or after since, the
// coarse clock read at launch. A file system that keeps whole seconds only
// (nanoseconds 0) is compared in seconds, so that a change in the launch's
// second is not missed; a file changed in the same second before the launch
// then counts as the run's, and is reported.
func changedSince(ctime, since unix.Timespec) bool {
	if ctime.Nsec == 0 {
		return ctime.Sec >= since.Sec
	}
	return ctime.Sec > since.Sec || ctime.Sec == since.Sec && ctime.Nsec >= since.Nsec
}

// stripOne clears the set-id bits of p if it is still the file seen.
// An O_PATH descriptor needs no read permission; chmod goes through its
// /proc/self/fd link, which fchmod(2) on O_PATH does not allow.
func stripOne(p string, seen unix.Stat_t) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return fmt.Errorf("strip set-id bits of %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("strip set-id bits of %s: %w", p, err)
	}
	if st.Ino != seen.Ino || st.Dev != seen.Dev || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("strip set-id bits of %s: the file changed during the scan", p)
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o1777); err != nil {
		return fmt.Errorf("strip set-id bits of %s: %w", p, err)
	}
	return nil
}

// removeNode unlinks the device node p if it is still the one seen.
func removeNode(p string, seen unix.Stat_t) error {
	dir, name := filepath.Split(p)
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return fmt.Errorf("remove device node %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("remove device node %s: %w", p, err)
	}
	if st.Ino != seen.Ino || st.Rdev != seen.Rdev {
		return fmt.Errorf("remove device node %s: the node changed during the scan", p)
	}
	if err := unix.Unlinkat(fd, name, 0); err != nil {
		return fmt.Errorf("remove device node %s: %w", p, err)
	}
	return nil
}

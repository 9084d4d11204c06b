package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenAt opens name in the directory dirfd (unix.AT_FDCWD: a path) for
// reading, as agentjail reads a file it did not make: first with O_PATH,
// which runs no driver's open (opening /dev/watchdog arms it) and waits
// for no FIFO's writer; then check sees its status and may refuse it; only
// then is it reopened for reading through /proc/self/fd, non-blocking, so
// that a path swapped meanwhile is not read either. With nofollow a link
// at name is not followed: check sees the link itself.
func OpenAt(dirfd int, name string, nofollow bool, check func(*unix.Stat_t) error) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	flags := unix.O_PATH | unix.O_CLOEXEC
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return nil, st, err // ENOENT matches fs.ErrNotExist
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, err
	}
	if err := check(&st); err != nil {
		return nil, st, err
	}
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, st, errors.New("cannot reopen it through /proc/self/fd; mount /proc")
	}
	if err != nil {
		return nil, st, fmt.Errorf("cannot open it for reading: %w", errors.Unwrap(err))
	}
	return f, st, nil
}

// Open opens the file p for reading (OpenAt) through w: below a writable
// root no link on the way is followed, p's own name included (ErrLink);
// above the roots only the operator's links are.
func (w Walker) Open(p string, check func(*unix.Stat_t) error) (*os.File, unix.Stat_t, error) {
	d, name, err := w.Parent(p)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	defer d.Close()
	return d.Open(name, check)
}

// Open opens name in d for reading (OpenAt) without following a link at
// name: one below a writable root is ErrLink, one above the roots is
// followed when it is the operator's (a Walker resolved it already when
// it reached d).
func (d *Dir) Open(name string, check func(*unix.Stat_t) error) (*os.File, unix.Stat_t, error) {
	p := path.Join(d.Path, name)
	follow := !d.Beneath && isLink(d.fd(), name)
	if follow {
		if err := d.trustedName(name); err != nil {
			return nil, unix.Stat_t{}, err
		}
	}
	f, st, err := OpenAt(d.fd(), name, !follow, func(st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return ErrLink
		}
		return check(st)
	})
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", p, err)
	}
	return f, st, nil
}

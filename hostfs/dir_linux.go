package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a directory held open by descriptor: what is done in it stays in
// it, wherever it is moved and whatever is put at its path meanwhile.
type Dir struct {
	f *os.File // O_RDONLY|O_DIRECTORY
	// Path is the path it was reached by, for messages.
	Path string
	// Beneath: it lies in a writable root, so what is in it is the
	// agent's: nothing is taken from it (a mode, an owner).
	Beneath bool
}

func (d *Dir) fd() int { return int(d.f.Fd()) }

// Close lets go of the directory; a nil Dir is fine.
func (d *Dir) Close() error {
	if d == nil {
		return nil
	}
	return d.f.Close()
}

// Stat is the directory's own status.
func (d *Dir) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(d.fd(), &st)
	return st, err
}

// Lstat is the status of name in d, a link not followed.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// Remove removes the entry name from d (a file, or a link itself).
func (d *Dir) Remove(name string) error { return unix.Unlinkat(d.fd(), name, 0) }

// RemoveDir removes the empty directory name from d.
func (d *Dir) RemoveDir(name string) error { return unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR) }

// Where is where the directory is now, as the kernel names it
// (/proc/self/fd): its Path, unless it was moved since it was opened.
func (d *Dir) Where() string {
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(d.fd())); err == nil && path.IsAbs(p) {
		return p
	}
	return d.Path
}

// MkdirAll opens the directory rel below d, creating what is missing of it
// (perm, owned by uid:gid when uid >= 0 and agentjail is root), without
// following a link, whether d lies in a writable root or not.
func (d *Dir) MkdirAll(rel string, perm uint32, uid, gid int) (*Dir, error) {
	rest := path.Clean(rel)
	if rest == ".." || strings.HasPrefix(rest, "../") || path.IsAbs(rest) {
		return nil, fmt.Errorf("%s: %w", path.Join(d.Path, rel), ErrOutside)
	}
	var parts []string
	if rest != "." {
		parts = strings.Split(rest, "/")
	}
	strict := *d
	strict.Beneath = true // what agentjail walks into is held to the rule
	sub, err := strict.walk(d.fd(), parts, true, perm, uid, gid)
	if sub != nil {
		sub.Beneath = d.Beneath
	}
	return sub, err
}

// CheckWritable fails when agentjail cannot create a file in d.
func (d *Dir) CheckWritable() error {
	f, tmp, err := d.temp(0o600)
	if err != nil {
		return err
	}
	f.Close()
	return unix.Unlinkat(d.fd(), tmp, 0)
}

// temp creates a new, empty file in d under a random hidden name (the
// runtime's generator, seeded by the kernel: no name to plant ahead),
// O_EXCL|O_NOFOLLOW: a name someone else holds is never opened.
func (d *Dir) temp(perm uint32) (*os.File, string, error) {
	for {
		name := ".agentjail-" + strconv.FormatUint(rand.Uint64(), 36)
		fd, err := unix.Openat(d.fd(), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("cannot create a file in %s: %w", d.Path, err)
		}
		return os.NewFile(uintptr(fd), path.Join(d.Path, name)), name, nil
	}
}

// fill writes src into the new file f, sets its mode and owner by
// descriptor and closes it; it returns the file's inode and device, by
// which the name it is given is checked once in place.
func fill(f *os.File, src io.Reader, perm uint32, uid, gid int, sync bool) (unix.Stat_t, error) {
	var st unix.Stat_t
	_, err := io.Copy(f, src)
	if err == nil {
		err = own(int(f.Fd()), perm, uid, gid)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if err == nil {
		err = unix.Fstat(int(f.Fd()), &st)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return st, err
}

// placed checks that name in d is the file made (st): a name is replaced
// by a rename, which another run's agent sharing the directory could have
// swapped the temporary file under.
func (d *Dir) placed(name string, st unix.Stat_t) error {
	now, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if now.Ino != st.Ino || now.Dev != st.Dev {
		return fmt.Errorf("%s: %w", path.Join(d.Path, name), ErrMoved)
	}
	return nil
}

// Replace puts data in d as name, atomically: a new file, synced, renamed
// over name (renameat(2) replaces what is there, a link or a file, and
// follows nothing), then the directory synced. The file is 0600 and
// agentjail's own, except that outside the writable roots it keeps the
// mode and owner of the regular file it replaces (the operator's).
func (d *Dir) Replace(name string, data []byte) error {
	mode, uid, gid := uint32(0o600), -1, -1
	if st, err := d.Lstat(name); err == nil && !d.Beneath && st.Mode&unix.S_IFMT == unix.S_IFREG {
		mode, uid, gid = st.Mode&0o7777&^(unix.S_ISUID|unix.S_ISGID), int(st.Uid), int(st.Gid)
	}
	f, tmp, err := d.temp(0o600)
	if err != nil {
		return err
	}
	st, err := fill(f, bytes.NewReader(data), mode, uid, gid, true)
	if err == nil {
		err = unix.Renameat(d.fd(), tmp, d.fd(), name)
	}
	if err != nil {
		unix.Unlinkat(d.fd(), tmp, 0)
		return err
	}
	if err := d.placed(name, st); err != nil {
		return err
	}
	return d.f.Sync() // the rename itself, durable
}

// maxTries bounds the names AddNew tries: name, then name.1 up to
// name.<maxTries-1> (before the extension).
const maxTries = 1000

// renameat2 is unix.Renameat2; a test replaces it to take the path of file
// systems without RENAME_NOREPLACE (EINVAL).
var renameat2 = unix.Renameat2

// AddNew copies src into d as a new file named name, never replacing
// anything: when name is taken, it takes the first free of name.1,
// name.2... (before the extension: s.1.jsonl). The file appears whole or
// not at all (renameat2 RENAME_NOREPLACE, or link(2) where the file system
// lacks it), mode perm, owned by uid:gid when uid >= 0 and agentjail is
// root. It returns the name given.
func (d *Dir) AddNew(name string, src io.Reader, perm uint32, uid, gid int) (string, error) {
	f, tmp, err := d.temp(0o600)
	if err != nil {
		return "", err
	}
	defer unix.Unlinkat(d.fd(), tmp, 0) // a no-op once renamed; linked, the extra name
	st, err := fill(f, src, perm, uid, gid, false)
	if err != nil {
		return "", err
	}
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for n := range maxTries {
		try := name
		if n > 0 {
			try = stem + "." + strconv.Itoa(n) + ext
		}
		err := renameat2(d.fd(), tmp, d.fd(), try, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) {
			err = unix.Linkat(d.fd(), tmp, d.fd(), try, 0)
		}
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		return try, d.placed(try, st)
	}
	return "", fmt.Errorf("%s and %d other names for it are taken", path.Join(d.Path, name), maxTries-1)
}

// OpenAppend opens name in d for appending, creating it (0600) when
// missing. Below a writable root the name is never followed if a link, and
// an existing file must be a regular file with one link owned by uid
// (agentjail's user): not a link, a fifo, a device, nor a hard link to or a
// file of someone else's, which the agent could have left there. Outside
// the roots the name is opened as the operator gave it, but a link there is
// followed only when it is the operator's (a trusted link: /dev/stderr), so
// a link an earlier run with other writable roots left is not.
func (d *Dir) OpenAppend(name string, uid int) (*os.File, error) {
	p := path.Join(d.Path, name)
	flags := unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT | unix.O_CLOEXEC
	if d.Beneath {
		// O_NONBLOCK: a fifo opens at once (ENXIO) rather than wait for a reader.
		flags |= unix.O_NOFOLLOW | unix.O_NONBLOCK
	} else if err := d.trustedName(name); err != nil {
		return nil, err
	} else if st, err := d.Lstat(name); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		flags |= unix.O_NOFOLLOW // not a link now: nor when opened
	}
	fd, err := unix.Openat(d.fd(), name, flags, 0o600)
	switch {
	case errors.Is(err, unix.ELOOP) && d.Beneath:
		return nil, fmt.Errorf("%s: %w", p, ErrLink)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: %w", p, ErrForeignLink)
	case errors.Is(err, unix.ENXIO) && d.Beneath:
		return nil, fmt.Errorf("%s is a fifo: %w", p, ErrNotOwn)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if d.Beneath {
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		switch {
		case err != nil:
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			err = fmt.Errorf("%s is not a regular file: %w", p, ErrNotOwn)
		case st.Nlink != 1:
			err = fmt.Errorf("%s has %d hard links: %w", p, st.Nlink, ErrNotOwn)
		case int(st.Uid) != uid:
			err = fmt.Errorf("%s is owned by uid %d, not %d: %w", p, st.Uid, uid, ErrNotOwn)
		}
		if err == nil {
			err = unix.SetNonblock(fd, false)
		}
		if err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// ReadOwn reads the file name in d that is agentjail's own: opened without
// following a link and without blocking, and read only when it is a regular
// file of the effective user's, with one link, that no one else may write,
// of at most max bytes. Anything else is an error.
func (d *Dir) ReadOwn(name string, max int64) ([]byte, error) {
	fd, err := unix.Openat(d.fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s: %w: not a regular file", name, ErrNotOwn)
	case int(st.Uid) != os.Geteuid() || st.Nlink != 1 || st.Mode&0o022 != 0:
		return nil, fmt.Errorf("%s: %w: owner %d, %d links, mode %04o", name, ErrNotOwn, st.Uid, st.Nlink, st.Mode&0o7777)
	case st.Size > max:
		return nil, fmt.Errorf("%s: %d bytes, more than %d", name, st.Size, max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

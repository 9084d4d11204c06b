package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Walker opens directories for operator paths. Roots are the directories
// an agent may have written: the run's writable roots, canonical (no link
// in them, as mounts.Render requires). Below a root no link is followed;
// above the roots, links are the operator's own and are followed.
type Walker struct {
	Roots []string
}

// Strict is the walker for when the writable roots are not known (the
// profile did not load): every directory counts as below one, so no link
// is followed anywhere.
var Strict = Walker{Roots: []string{"/"}}

// maxLinks bounds the links followed above the roots, as the kernel's
// MAXSYMLINKS (40) bounds a path lookup.
const maxLinks = 40

// openat2 is unix.Openat2; a test replaces it to take the path of kernels
// before Linux 5.6, which lack the call (ENOSYS).
var openat2 = unix.Openat2

// root returns the writable root p lies in, "" for none.
func (w Walker) root(p string) string {
	for _, r := range w.Roots {
		if r == "/" || p == r || strings.HasPrefix(p, r+"/") {
			return r
		}
	}
	return ""
}

// Dir opens the existing directory p.
func (w Walker) Dir(p string) (*Dir, error) { return w.open(p, false, 0) }

// MkdirAll opens the directory p, creating what is missing of it with
// perm (as mkdir -p): below a root without following a link, each new
// directory made by mkdirat(2) in its parent's descriptor.
func (w Walker) MkdirAll(p string, perm uint32) (*Dir, error) { return w.open(p, true, perm) }

// Parent opens the directory that holds p and returns it with p's name in
// it. Above the roots a link at p itself is followed (the operator's);
// below one, p's name is returned as it is, whatever it names.
func (w Walker) Parent(p string) (*Dir, string, error) {
	abs, err := absolute(p)
	if err != nil {
		return nil, "", err
	}
	base, rest, err := w.split(abs)
	if err != nil {
		return nil, "", err
	}
	if len(rest) == 0 { // all of p resolved above the roots (or p is a root)
		if base == "/" {
			return nil, "", fmt.Errorf("%s: is a directory", p)
		}
		d, err := w.open(path.Dir(base), false, 0)
		return d, path.Base(base), err
	}
	name := rest[len(rest)-1]
	d, err := w.below(base, rest[:len(rest)-1], false, 0)
	return d, name, err
}

func (w Walker) open(p string, create bool, perm uint32) (*Dir, error) {
	abs, err := absolute(p)
	if err != nil {
		return nil, err
	}
	base, rest, err := w.split(abs)
	if err != nil {
		return nil, err
	}
	return w.below(base, rest, create, perm)
}

// below opens base, reached by split, and the components rest below it,
// which it walks without following a link.
func (w Walker) below(base string, rest []string, create bool, perm uint32) (*Dir, error) {
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: base, Err: err}
	}
	defer unix.Close(fd)
	d := &Dir{Path: base, Beneath: w.root(base) != ""}
	return d.walk(fd, rest, create, perm, -1, -1)
}

// absolute makes p absolute from the working directory as the kernel
// names it (getcwd(2), never $PWD, which may pass through links) and
// cleans it lexically, as the rest of agentjail reads paths.
func absolute(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if !path.IsAbs(p) {
		wd, err := unix.Getwd()
		if err != nil {
			return "", fmt.Errorf("cannot read the current directory: %w", err)
		}
		p = wd + "/" + p
	}
	return path.Clean(p), nil
}

// split resolves abs from / down to the first writable root it enters,
// following the links on the way that are the operator's (trusted). It
// returns the
// canonical path reached — a writable root, the last directory that
// exists, or all of abs resolved — and the components left below it, to
// be walked without links. A link above the roots whose target enters one
// is followed into it: the walk goes on from / with the target.
func (w Walker) split(abs string) (string, []string, error) {
	done, todo, links := "/", strings.Split(abs, "/"), 0
	for len(todo) > 0 && w.root(done) == "" {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			todo = append([]string{name}, todo...)
			break
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if descriptors(done) {
			// /proc/PID/fd/N (/dev/stderr, a shell's >(...)) names a
			// descriptor, often no path (pipe:[N]): the kernel follows
			// it when the file is opened.
			todo = append([]string{name}, todo...)
			break
		}
		if !trustedLink(done, next) {
			return "", nil, fmt.Errorf("%s: %w", next, ErrForeignLink)
		}
		if links++; links > maxLinks {
			return "", nil, &fs.PathError{Op: "open", Path: abs, Err: unix.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", nil, err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	// What is left is walked without links, so .. in it is read
	// lexically; it must not lead above where the walk stopped.
	rest := path.Clean(strings.TrimLeft(strings.Join(todo, "/"), "/"))
	switch {
	case rest == ".":
		return done, nil, nil
	case rest == ".." || strings.HasPrefix(rest, "../") || path.IsAbs(rest):
		return "", nil, fmt.Errorf("%s: %w", abs, ErrOutside)
	}
	return done, strings.Split(rest, "/"), nil
}

// descriptors reports whether dir is a /proc/PID/fd directory (procfs,
// proc(5)), whose entries are links to open files.
func descriptors(dir string) bool {
	var st unix.Statfs_t
	return path.Base(dir) == "fd" && unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// walk opens the directory rest below the directory fd (d.Path), without
// following a link, as a new Dir; with create, it makes what is missing
// (perm, owned by uid:gid when uid >= 0). fd stays open.
func (d *Dir) walk(fd int, rest []string, create bool, perm uint32, uid, gid int) (*Dir, error) {
	p := path.Join(append([]string{d.Path}, rest...)...)
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if len(rest) == 0 {
		nfd, err := unix.Openat(fd, ".", flags, 0)
		return d.at(nfd, p, err)
	}
	// In one call where the kernel offers it: no component can be
	// swapped for a link between two lookups. (RESOLVE_NO_SYMLINKS
	// covers the last one too, with ELOOP; O_NOFOLLOW would make it
	// ENOTDIR.)
	nfd, err := openat2(fd, strings.Join(rest, "/"), &unix.OpenHow{
		Flags:   flags &^ unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.ENAMETOOLONG) && !(create && errors.Is(err, unix.ENOENT)) {
		return d.at(nfd, p, err)
	}
	// One component at a time, each opened O_NOFOLLOW|O_DIRECTORY in its
	// parent's descriptor: a link fails to open (ELOOP, or ENOTDIR for
	// O_PATH), so none is followed. Also for a path longer than the
	// kernel takes in one call (PATH_MAX): what an agent nested deeper,
	// a new .git say, is reached all the same.
	cur, err := unix.Openat(fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return d.at(-1, d.Path, err)
	}
	at := d.Path
	for i, name := range rest {
		at = path.Join(at, name)
		made := false
		if create {
			err := unix.Mkdirat(cur, name, perm)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(cur)
				return d.at(-1, at, err)
			}
			made = err == nil
		}
		fl := flags
		if i < len(rest)-1 && !made {
			fl = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		next, err := unix.Openat(cur, name, fl, 0)
		if err != nil && isLink(cur, name) {
			err = unix.ELOOP
		}
		unix.Close(cur)
		if err == nil && made {
			err = own(next, perm, uid, gid)
		}
		if err != nil {
			if next >= 0 {
				unix.Close(next)
			}
			return d.at(-1, at, err)
		}
		cur = next
	}
	return d.at(cur, p, nil)
}

// at makes the Dir for fd, opened as p below d, or the error of opening it.
func (d *Dir) at(fd int, p string, err error) (*Dir, error) {
	switch {
	case errors.Is(err, unix.ELOOP) && d.Beneath:
		return nil, fmt.Errorf("%s: %w", p, ErrLink)
	case errors.Is(err, unix.EXDEV) && d.Beneath: // RESOLVE_BENEATH
		return nil, fmt.Errorf("%s: %w", p, ErrOutside)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), p), Path: p, Beneath: d.Beneath}, nil
}

// isLink reports whether name in dirfd is a symbolic link.
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// own sets the mode of fd, which the umask may have narrowed, and its owner
// when uid >= 0 and agentjail may give files away (it is root).
func own(fd int, perm uint32, uid, gid int) error {
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	if uid >= 0 && os.Geteuid() == 0 {
		return unix.Fchown(fd, uid, gid)
	}
	return nil
}

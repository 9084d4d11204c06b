package mounts

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Disk is the host's filesystem seen from / (os.DirFS("/") in production, an
// fstest.MapFS in tests). Paths given to it are relative ("home/alice").
type Disk = fs.ReadLinkFS

// placeholderDisk hides the mask placeholders of other runs: an empty file
// or an empty directory that is only one counts as missing, so it is
// masked again.
//
// isPlaceholder (runstate.Registered) may be asked without the registry's
// lock: a run registers a placeholder before bwrap makes it, and removes
// it before its entry. So an empty path that was not registered when
// asked is the user's only if it was there before the question and is
// still there, the same file, after it; one that went or was replaced
// meanwhile was a placeholder being removed (or is missing now anyway).
type placeholderDisk struct {
	Disk
	isPlaceholder func(path string) bool
}

func (d placeholderDisk) Lstat(name string) (fs.FileInfo, error) {
	fi, err := d.Disk.Lstat(name)
	if err != nil || d.isPlaceholder == nil || !d.empty(name, fi) {
		return fi, err
	}
	gone := &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	if d.isPlaceholder("/" + name) {
		return nil, gone
	}
	if again, err := d.Disk.Lstat(name); err != nil || !sameFile(fi, again) {
		return nil, gone
	}
	return fi, nil
}

// empty says whether name is an empty file or directory: of a directory
// it reads one entry, not all.
func (d placeholderDisk) empty(name string, fi fs.FileInfo) bool {
	if !fi.IsDir() {
		return fi.Mode().IsRegular() && fi.Size() == 0
	}
	f, err := d.Disk.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	dir, ok := f.(fs.ReadDirFile)
	if !ok {
		return false
	}
	_, err = dir.ReadDir(1)
	return err == io.EOF
}

// rel turns an absolute path into a Disk name.
func rel(abs string) string {
	if abs == "/" {
		return "."
	}
	return strings.TrimPrefix(abs, "/")
}

func lstat(d Disk, abs string) (fs.FileInfo, error) { return d.Lstat(rel(abs)) }

func exists(d Disk, abs string) bool {
	_, err := lstat(d, abs)
	return err == nil
}

// maxLinks bounds symlink resolution, as the kernel does (MAXSYMLINKS).
const maxLinks = 40

// resolve returns abs with every symlink in it resolved, like
// filepath.EvalSymlinks but through d. A missing final component is fine;
// the result then names where it would be.
func resolve(d Disk, abs string) (string, error) {
	t, _, err := follow(d, abs, nil)
	return t, err
}

// follow resolves p as the kernel would, through d: ".." after a symlink
// leaves the link's target, not the link's directory (p may be a path git
// read from a file, "gitdir/../shared.cfg"). It also returns the first
// symlink it met that lies under one of roots, or "": one the agent could
// replace. From the first missing component on, the rest is joined
// lexically.
func follow(d Disk, p string, roots []string) (target, link string, err error) {
	links := 0
	done := "/"
	todo := strings.Split(p, "/")
	for len(todo) > 0 {
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
		fi, err := lstat(d, next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return path.Join(append([]string{next}, todo...)...), link, nil
		}
		if err != nil {
			return "", "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		if link == "" && underAny(next, roots) {
			link = next
		}
		target, err := d.ReadLink(rel(next))
		if err != nil {
			return "", "", err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return done, link, nil
}

// User is the identity the jail runs as.
type User struct {
	UID, GID int
	Groups   []int
	Name     string
	Home     string
	Why      string // how the run user was chosen, for messages ("--user", ...)
}

// permission bits asked of access.
const (
	mayRead  = 4
	mayWrite = 2
	mayExec  = 1
)

// can reports whether u may do want on fi, from its owner, group and mode
// bits (ACLs are not read). uid 0 is no exception: the agent never holds
// capabilities (a sealed root runs with --cap-drop ALL, in a user namespace
// that maps only uid 0, where CAP_DAC_OVERRIDE would not reach other
// owners' files anyway: capable_wrt_inode_uidgid), and bwrap's own setup as
// that root cannot create a mask placeholder in another owner's directory.
func (u User) can(fi fs.FileInfo, want uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := uint32(fi.Mode().Perm())
	switch {
	case int(st.Uid) == u.UID:
		perm >>= 6
	case int(st.Gid) == u.GID || slices.Contains(u.Groups, int(st.Gid)):
		perm >>= 3
	}
	return perm&want == want
}

// reachable reports whether u can traverse to abs: search permission on
// every directory above it.
func (u User) reachable(d Disk, abs string) bool { return u.closedAbove(d, abs) == "" }

// closedAbove is the outermost directory above abs that u may not search,
// "" where there is none.
func (u User) closedAbove(d Disk, abs string) string {
	closed := ""
	for dir := path.Dir(abs); ; dir = path.Dir(dir) {
		if fi, err := lstat(d, dir); err != nil || !u.can(fi, mayExec) {
			closed = dir
		}
		if dir == "/" {
			return closed
		}
	}
}

// canEnter reports whether u may make abs (a directory, or a link to one)
// its working directory.
func (u User) canEnter(d Disk, abs string) bool {
	if t, err := resolve(d, abs); err == nil {
		abs = t
	}
	fi, err := lstat(d, abs)
	return err == nil && u.reachable(d, abs) && u.can(fi, mayExec)
}

// canWrite reports whether u may create files in the directory abs.
// CanWrite reports whether u may create entries in the directory abs (or
// write the file abs): write and search permission, and a way to it.
func (u User) CanWrite(d Disk, abs string) bool { return u.canWrite(d, abs) }

func (u User) canWrite(d Disk, abs string) bool {
	fi, err := lstat(d, abs)
	return err == nil && u.reachable(d, abs) && u.can(fi, mayWrite|mayExec)
}

// canReadTree reports whether u can read abs and, for a directory, all of
// what lies under it.
func (u User) canReadTree(d Disk, abs string) bool {
	if !u.reachable(d, abs) {
		return false
	}
	ok := true
	_ = fs.WalkDir(d, rel(abs), func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		fi, err := e.Info()
		want := uint32(mayRead)
		if e.IsDir() {
			want |= mayExec
		}
		if err != nil || e.Type()&fs.ModeSymlink == 0 && !u.can(fi, want) {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

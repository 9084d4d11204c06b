package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentjail/agentjail/record"
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
// made since then (an agent never holds CAP_MKNOD, so there should be
// none). Each is a violation. Files that were set-id before the run are
// left alone. The walk goes from directory descriptor to directory
// descriptor (openat with O_NOFOLLOW, fstatat with AT_SYMLINK_NOFOLLOW), as
// find(1) does, so a link is never followed, even one swapped in during
// the walk, and no path is resolved twice.
func StripSetID(roots []string, since unix.Timespec) ([]record.Note, error) {
	scan, err := ScanAfterRun(roots, since, nil)
	return scan.Notes, err
}

// Scan is what ScanAfterRun found.
type Scan struct {
	// Notes are the set-id bits stripped and the device nodes removed.
	Notes []record.Note
	// Born are the .git entries born since the run started.
	Born []string
	// Changed are the older .git entries that changed since, themselves
	// or anything they hold (a directory renamed to .git keeps its birth
	// time, and gets a new change time).
	Changed []string
	// Heads are the files named HEAD born since, outside an older .git:
	// a directory the agent made a git directory (HEAD and refs) shows
	// by its HEAD, config and hooks or none.
	Heads []string
}

// ScanAfterRun is StripSetID, and also returns every .git (a directory, a
// file or a link) under the roots born since the run started (statx's
// birth time; where a file system keeps none, a .git that is no directory
// and changed since), and every older one that changed since: the same
// walk sees the places the search for protected paths does not go
// (node_modules, what a directory that looks like a git directory holds),
// where a repository of the agent's, reached by git through a gitlink in
// the index or in a commit, would otherwise stay.
// Once stop is closed (nil: never), the walk goes no further, strips
// nothing more, and says so in its error.
func ScanAfterRun(roots []string, since unix.Timespec, stop <-chan struct{}) (Scan, error) {
	w := setIDWalk{since: since, stop: stop}
	for _, root := range roots {
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ENOENT) {
				w.fail(fmt.Errorf("%s: %w", root, err))
			}
			continue // a file as a writable root: its directory is not walked
		}
		w.dir(fd, root, "")
	}
	// Directory order is the file system's; the record's is by path.
	slices.SortFunc(w.notes, func(a, b record.Note) int { return strings.Compare(a.Detail, b.Detail) })
	slices.Sort(w.newGit)
	changed := slices.Sorted(maps.Keys(w.changed))
	slices.Sort(w.heads)
	scan := Scan{Notes: w.notes, Born: w.newGit, Changed: changed, Heads: w.heads}
	if w.more > 0 {
		w.errs = append(w.errs, fmt.Errorf("and %d more", w.more))
	}
	if len(w.errs) > 0 {
		return scan, fmt.Errorf("set-id scan of the writable roots: %w", errors.Join(w.errs...))
	}
	return scan, nil
}

// maxWalkDepth is how deep below a root the walk after the run goes: each
// level holds a descriptor and its path, so a chain of directories the
// agent made as deep as the descriptor limit allows (a container's may be
// 1 048 576) would take memory in the square of its depth. Deeper is not
// checked (a violation, unchecked); no project nests so deep.
const maxWalkDepth = 2048

// maxWalkPath bounds the path of a directory the walk enters, in bytes
// (PATH_MAX is 4096: what lies deeper no tool reaches by its path), so
// that the levels held cost at most maxWalkDepth × maxWalkPath however
// long their names.
const maxWalkPath = 16 << 10

// maxWalkErrors are the walk's errors said; more are counted.
const maxWalkErrors = 10

type setIDWalk struct {
	since   unix.Timespec
	depth   int // of the directory being walked, below its root
	stop    <-chan struct{}
	stopped bool
	more    int // errors past maxWalkErrors
	notes   []record.Note
	newGit  []string
	heads   []string
	changed map[string]bool // older .git entries changed since
	errs    []error
}

// fail notes an error of the walk: the first maxWalkErrors, then a count
// (an agent can make a hundred thousand places the walk cannot go).
func (w *setIDWalk) fail(err error) {
	if len(w.errs) < maxWalkErrors {
		w.errs = append(w.errs, err)
	} else {
		w.more++
	}
}

// changedSinceAt reports whether name in dirfd changed since the run
// started (its change time).
func (w *setIDWalk) changedSinceAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && changedSince(st.Ctim, w.since)
}

func (w *setIDWalk) change(git string) {
	if w.changed == nil {
		w.changed = map[string]bool{}
	}
	w.changed[git] = true
}

// sinceRun reports, of name in dirfd, whether it came to be since the run
// started (its birth time, or, where the file system keeps none, the
// change time of one that is no directory: a directory's changes with
// what it holds), and whether it changed since: one statx.
func (w *setIDWalk) sinceRun(dirfd int, name string) (born, changed bool) {
	var stx unix.Statx_t
	if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME|unix.STATX_TYPE, &stx) != nil {
		return false, false
	}
	changed = changedSince(unix.Timespec{Sec: stx.Ctime.Sec, Nsec: int64(stx.Ctime.Nsec)}, w.since)
	if stx.Mask&unix.STATX_BTIME != 0 {
		return changedSince(unix.Timespec{Sec: stx.Btime.Sec, Nsec: int64(stx.Btime.Nsec)}, w.since), changed
	}
	return stx.Mode&unix.S_IFMT != unix.S_IFDIR && changed, changed
}

// dir walks the directory open as fd (named p), and closes fd. git is
// the older .git p lies in, "" for none.
func (w *setIDWalk) dir(fd int, p, git string) {
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	for {
		select {
		case <-w.stop:
			if !w.stopped {
				w.stopped = true
				w.fail(fmt.Errorf("%s: the walk was stopped here", p))
			}
			return
		default:
		}
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			w.entry(fd, p, git, e)
		}
		if err != nil {
			if err != io.EOF {
				w.fail(fmt.Errorf("%s: %w", p, err))
			}
			return
		}
	}
}

func (w *setIDWalk) entry(dirfd int, dir, git string, e fs.DirEntry) {
	name, p := e.Name(), filepath.Join(dir, e.Name())
	t := e.Type()
	switch {
	case git != "":
		// What an older .git holds changed: a directory's change time
		// says here, a file's where the set-id check below reads it.
		if t.IsDir() && !w.changed[git] && w.changedSinceAt(dirfd, name) {
			w.change(git)
		}
	case name == ".git":
		born, changed := w.sinceRun(dirfd, name)
		if born {
			w.newGit = append(w.newGit, p)
			break
		}
		git = p // older: its change time, and what it holds, tell
		if changed {
			w.change(git)
		}
	case name == "HEAD" && t.IsRegular():
		if born, _ := w.sinceRun(dirfd, name); born {
			w.heads = append(w.heads, p)
		}
	}
	if t.IsDir() {
		if w.depth == maxWalkDepth || len(p) > maxWalkPath {
			w.fail(fmt.Errorf("%s: nested deeper than %d directories or %d bytes of path below its root", p, maxWalkDepth, maxWalkPath))
			return
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			return // gone since it was listed: another run's placeholder, removed
		}
		if err != nil {
			w.fail(fmt.Errorf("%s: %w", p, err))
			return
		}
		w.depth++
		w.dir(fd, p, git)
		w.depth--
		return
	}
	if t&^(fs.ModeCharDevice|fs.ModeDevice) != 0 {
		return // links, fifos, sockets
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !changedSince(st.Ctim, w.since) {
		return
	}
	if git != "" {
		w.change(git)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
			return
		}
		if err := stripOne(dirfd, name, st); err != nil {
			w.fail(fmt.Errorf("strip set-id bits of %s: %w", p, err))
			return
		}
		w.notes = append(w.notes, setIDNote(p, st.Mode))
	case unix.S_IFCHR, unix.S_IFBLK:
		if st.Rdev == 0 {
			return // an overlayfs whiteout: opens nothing
		}
		if err := unix.Unlinkat(dirfd, name, 0); err != nil {
			w.fail(fmt.Errorf("remove device node %s: %w", p, err))
			return
		}
		w.notes = append(w.notes, deviceNote(p, unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	}
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

// stripOne clears the set-id bits of name in dirfd if it is still the
// file seen. An O_PATH descriptor needs no read permission; chmod goes
// through its /proc/self/fd link, which fchmod(2) on O_PATH does not allow.
func stripOne(dirfd int, name string, seen unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Ino != seen.Ino || st.Dev != seen.Dev || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("the file changed during the scan")
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o1777)
}

func setIDNote(p string, mode uint32) record.Note {
	return record.Note{What: record.ViolationSetID, Detail: fmt.Sprintf("%s: the run made it set-user/group-id (mode %04o); the bits were stripped (now %04o)", p, mode&0o7777, mode&0o1777)}
}

func deviceNote(p string, major, minor uint32) record.Note {
	return record.Note{What: record.ViolationDevice, Detail: fmt.Sprintf("%s: the run made a device node (%d:%d) under a writable root; it was removed", p, major, minor)}
}

package mounts

import (
	"io/fs"
	"path"
	"syscall"

	"github.com/agentjail/agentjail/policy"
)

// Snapshot is what the protected paths under the writable roots look like:
// every path a protect pattern names that exists, down to protect_depth as
// Render searches, and everything inside those that are directories. Taken
// before and after a run, the two tell what the run created, changed or
// removed where the read-only binds could not reach: a protected name made
// at depth where none existed, or one made after a parent was moved aside
// (supervise.ProtectedChanges decides what counts).
type Snapshot map[string]Entry

// Entry identifies one state of a path. The change time cannot be set by
// an unprivileged process (utimensat(2) sets only atime and mtime), so a
// write, chmod, rename or replacement of the path changes the Entry.
type Entry struct {
	Mode    fs.FileMode
	Size    int64
	ModTime int64 // ns
	Ino     uint64
	Ctime   int64 // ns
}

// watched are names no read-only bind can protect but whose appearance is a
// violation: git reads $GIT_DIR/commondir in any repository, not only in a
// worktree's (setup.c, get_common_dir_noenv), and takes config and hooks
// from the directory it names, so a planted one bypasses the read-only
// .git/config and .git/hooks. A mask cannot cover it: git dies on an empty
// commondir, in the jail and on the host.
var watched = []string{".git/commondir"}

// TakeSnapshot records the protected paths under p's writable roots, as
// Render finds them. isPlaceholder (supervise.IsMask) hides the mask
// placeholders of live or killed runs: they are agentjail's, not the
// agent's.
func TakeSnapshot(d Disk, p policy.Policy, isPlaceholder func(string) bool) Snapshot {
	d = placeholderDisk{d, isPlaceholder}
	roots := WritableRoots(p)
	depth := policy.DefaultProtectDepth
	if p.Filesystem.ProtectDepth != nil {
		depth = *p.Filesystem.ProtectDepth
	}
	s := Snapshot{}
	for _, pat := range p.Filesystem.Protect {
		if path.IsAbs(pat) && underAny(pat, roots) {
			s.add(d, pat)
		}
	}
	for _, root := range roots {
		walkDirs(d, root, depth, func(dir string, names []string) {
			for _, pat := range append(watched, p.Filesystem.Protect...) {
				if path.IsAbs(pat) {
					continue
				}
				for _, q := range present(d, dir, names, pat) {
					s.add(d, q)
				}
			}
			for _, g := range gitdirTargets(d, dir) {
				for _, sub := range []string{"hooks", "config"} {
					if q := path.Join(g, sub); underAny(q, roots) {
						s.add(d, q)
					}
				}
			}
			for _, h := range hooksPaths(d, dir) {
				if underAny(h, roots) {
					s.add(d, h)
				}
			}
		})
	}
	return s
}

// add records p if it exists and, for a directory (not a link to one),
// everything below it.
func (s Snapshot) add(d Disk, p string) {
	if _, done := s[p]; done {
		return
	}
	fi, err := lstat(d, p)
	if err != nil {
		return
	}
	s[p] = entryOf(fi)
	if !fi.IsDir() {
		return
	}
	_ = fs.WalkDir(d, rel(p), func(name string, e fs.DirEntry, err error) error {
		if err != nil || name == rel(p) {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			s["/"+name] = entryOf(fi)
		}
		return nil
	})
}

func entryOf(fi fs.FileInfo) Entry {
	e := Entry{Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Ino, e.Ctime = st.Ino, st.Ctim.Nano()
	}
	return e
}

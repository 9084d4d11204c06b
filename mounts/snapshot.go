package mounts

import (
	"io/fs"
	"path"
	"syscall"

	"github.com/agentjail/agentjail/policy"
)

// Snapshot is what the protected paths under the writable roots look like:
// every path a protect pattern names that exists, down to protect_depth as
// Render searches, what git reads configuration from or runs in every
// repository under them, and everything inside those that are directories. Taken
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
	// Unreadable: a directory the search could not read; what is below
	// it is not in the snapshot.
	Unreadable bool
	// Cut: the path the snapshot stopped at, at its size (maxSnapshot):
	// what follows in it is not in the snapshot; Skipped: a protected path
	// after it, recorded alone.
	Cut, Skipped bool
}

// maxSnapshot bounds what a snapshot holds, in bytes of paths (and a
// little for each entry): an agent that planted 150 000 files with
// 4 KB paths in a protected .vscode made agentjail hold a gigabyte, in
// every later run's snapshots too.
var maxSnapshot = 16 << 20 // a variable for the tests

// budget is what is left of maxSnapshot.
type budget struct{ left int }

// take spends one entry of path p, and reports whether there was room.
func (b *budget) take(p string) bool {
	b.left -= len(p) + 160 // the entry, and the map's own
	return b.left >= 0
}

// TakeSnapshot records the protected paths under p's writable roots, as
// Render finds them, and the paths no mount can keep from being created
// (protection.watched). isPlaceholder (runstate.MaskView.IsMask) hides the mask
// placeholders of live or killed runs: they are agentjail's, not the
// agent's. What a run made is found by the same search afterwards: a new
// repository's config and hooks, a submodule's or worktree's git directory
// added under .git, a protected name made at depth. "~/" in git paths is
// not followed here (Render knows the homes): what it names is read-only
// during the run.
func TakeSnapshot(d Disk, p policy.Policy, isPlaceholder func(string) bool) Snapshot {
	d = placeholderDisk{d, isPlaceholder}
	depth := policy.DefaultProtectDepth
	if p.Filesystem.ProtectDepth != nil {
		depth = *p.Filesystem.ProtectDepth
	}
	pr := findProtected(d, WritableRoots(p), p.Filesystem.Protect, depth, nil)
	s := Snapshot{}
	b := &budget{left: maxSnapshot}
	for _, list := range [][]string{pr.existing, pr.links, pr.watched} {
		for _, q := range list {
			s.add(d, q, b)
		}
	}
	for _, q := range pr.gitDirs {
		if _, done := s[q]; done {
			continue
		}
		if fi, err := lstat(d, q); err == nil {
			b.take(q) // a path held like any other
			s[q] = Entry{Mode: fi.Mode().Type()}
		}
	}
	for _, q := range pr.unreadable {
		e := s[q]
		e.Unreadable = true
		s[q] = e
	}
	return s
}

// add records p if it exists and, for a directory (not a link to one),
// everything below it, while b has room; the directory it stops in is
// marked Cut.
func (s Snapshot) add(d Disk, p string, b *budget) {
	if _, done := s[p]; done {
		return
	}
	fi, err := lstat(d, p)
	if err != nil {
		return
	}
	e := entryOf(fi)
	switch {
	case b.left < 0:
		e.Skipped = true
	case !b.take(p):
		e.Cut = true
	}
	s[p] = e
	if e.Cut || e.Skipped || !fi.IsDir() {
		return
	}
	cut := func() {
		top := s[p]
		top.Cut = true
		s[p] = top
	}
	walkBounded(d, rel(p), 0, func(name string, isDir bool) (descend, more bool) {
		// Through d, not the entry's own: a mask placeholder inside the
		// directory (bwrap's mount point for a protected name that was
		// missing) is agentjail's, made and removed around the run, not a
		// change.
		fi, err := d.Lstat(name)
		if err != nil {
			return false, true
		}
		if !b.take("/" + name) {
			cut()
			return false, false
		}
		s["/"+name] = entryOf(fi)
		return fi.IsDir(), true
	}, cut)
}

// maxSnapshotDepth is how deep below a protected directory a snapshot
// goes: each level holds a descriptor while it is read.
const maxSnapshotDepth = 256

// walkBounded visits what lies below the directory dir (a Disk name),
// depth first, in the directory's own order, reading it in batches: a
// directory of a million entries costs what the visit keeps, not a list
// of them all. visit says whether to go into an entry that is a directory,
// and whether to go on at all; deep is called instead of going below
// maxSnapshotDepth. It returns false once visit has said to stop.
func walkBounded(d Disk, dir string, level int, visit func(name string, isDir bool) (descend, more bool), deep func()) bool {
	if level == maxSnapshotDepth {
		deep()
		return false
	}
	f, err := d.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	rd, ok := f.(fs.ReadDirFile)
	if !ok {
		return true
	}
	for {
		entries, err := rd.ReadDir(256)
		for _, e := range entries {
			name := path.Join(dir, e.Name())
			descend, more := visit(name, e.IsDir())
			if !more {
				return false
			}
			if descend && !walkBounded(d, name, level+1, visit, deep) {
				return false
			}
		}
		if err != nil {
			return true
		}
	}
}

func entryOf(fi fs.FileInfo) Entry {
	e := Entry{Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Ino, e.Ctime = st.Ino, st.Ctim.Nano()
	}
	return e
}

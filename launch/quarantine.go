package launch

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/record"
	"golang.org/x/sys/unix"
)

// QuarantineSuffix is added to the name of what quarantine moves aside,
// before the run's id.
const QuarantineSuffix = ".agentjail-quarantine-"

// quarantine compares the protected paths before and after a run, as
// mounts.ProtectedChanges does, and first moves aside what the run made that git
// would take for a git directory of the operator's: every .git (a file or
// a directory) that is new, every new commondir, and the HEAD of every
// directory that became a bare git directory (mounts.IsGitDir) with
// config or hooks of its own. Each is renamed in its own directory,
// reached through w (no link in a writable root followed) and by
// descriptor, to its name with QuarantineSuffix and runID (or, where the
// run made that name, one it could not know): the operator's next git
// then finds none there (a new submodule entered in the index whose .git
// names the agent's git directory, whose core.fsmonitor would run at the
// next `git status`, is a directory without a repository again). It
// returns the notes: one for each path moved aside, saying where it is
// now, then mounts.ProtectedChanges' for the rest.
// protected are the paths the jail protected (mounts.Plan.Protected, masks
// included): a .git that held one of them was there before the run, even
// when the snapshot holds nothing of it (its config and hooks were
// missing, and masked).
// gitFound is what the walk after the run found of .git entries
// (hostfs.Scan): born during the run, and older ones that changed during
// it where the search before it saw none.
// heads are directories made git directories by a HEAD born during it.
type gitFound struct{ born, changed, heads []string }

// Once stop is closed (nil: never), nothing more is moved.
func quarantine(before, after mounts.Snapshot, protected []string, walked gitFound, w hostfs.Walker, runID string, stop <-chan struct{}) []record.Note {
	var notes []record.Note
	rest := maps.Clone(after)
	found := newGitEntries(before, after, protected, gitDirOn(w))
	// Every .git born during the run, also where the search does not go
	// (hostfs.ScanAfterRun): git reaches those through a gitlink (in the
	// index, in a commit the operator checks out).
	seen := mounts.NewPathSet()
	for _, g := range found {
		seen.Add(g.path)
	}
	for _, c := range []struct {
		paths         []string
		changed, bare bool
	}{{walked.born, false, false}, {walked.changed, true, false}, {walked.heads, false, true}} {
		for _, p := range c.paths {
			if !seen.Covers(p) {
				found = append(found, gitEntry{path: p, changed: c.changed, bare: c.bare})
				seen.Add(p)
			}
		}
	}
	// Said by a note below: an entry and what it holds, or a bare git
	// directory's config and hooks (what else it holds is a project's like
	// any other, reported as such).
	said := mounts.NewPathSet()
	for _, g := range found {
		if g.bare {
			said.Add(path.Join(g.path, "config"))
			said.Add(path.Join(g.path, "hooks"))
		} else {
			said.Add(g.path)
		}
	}
	for q := range rest {
		if said.Covers(q) {
			delete(rest, q)
		}
	}
	for _, g := range found {
		select {
		case <-stop:
			return notes // the checks were cut short: their caller says so
		default:
		}
		detail := fmt.Sprintf("%s appeared during the run: git takes it for a git directory (%s)", g.path, path.Base(g.path))
		move, what := g.path, ""
		switch {
		case g.changed:
			detail = fmt.Sprintf("%s changed during the run (it, or what it holds), where the search for protected paths did not see it before (node_modules, say; a directory renamed to .git keeps its birth time): git takes it for a git directory", g.path)
		case g.bare:
			// Its HEAD goes, and with it the repository; the directory
			// and what else it holds stay.
			detail = fmt.Sprintf("%s became a git directory during the run: it holds HEAD with refs or a commondir, which git takes for a repository", g.path)
			move, what = path.Join(g.path, "HEAD"), " its HEAD"
		}
		d, name, err := w.Parent(move)
		var aside string
		if err == nil {
			aside, err = moveAside(d, name, QuarantineSuffix+runID)
			d.Close()
		}
		if err != nil {
			detail += fmt.Sprintf(", and%s could not be moved aside (%v): remove it before git runs there", what, err)
		} else {
			detail += fmt.Sprintf(";%s moved aside to %s, so that git does not use it: review it before you move it back", what, aside)
		}
		notes = append(notes, record.Note{What: record.ViolationProtected, Detail: detail})
	}
	return append(notes, mounts.ProtectedChanges(before, rest)...)
}

// moveAside renames name in d to name+suffix or, where that is taken (the
// jail knew the run's id, and may have made it), to a name with a random
// part after it, which nothing in the jail could know.
func moveAside(d *hostfs.Dir, name, suffix string) (string, error) {
	aside, err := d.MoveAside(name, suffix)
	if !errors.Is(err, unix.EEXIST) {
		return aside, err
	}
	return d.MoveAside(name, suffix+"-"+rand.Text()[:10])
}

// gitDirOn reports whether a directory holds what makes it a git
// directory to git (mounts.IsGitDir), each entry looked up through w
// without following a link.
func gitDirOn(w hostfs.Walker) func(dir string) bool {
	return func(dir string) bool {
		d, err := w.Dir(dir)
		if err != nil {
			return false
		}
		defer d.Close()
		return mounts.IsGitDir(func(n string) bool { _, err := d.Lstat(n); return err == nil })
	}
}

// present reports whether p, reached through w, is there (a link too).
func present(w hostfs.Walker, p string) bool {
	d, name, err := w.Parent(p)
	if err != nil {
		return false
	}
	defer d.Close()
	_, err = d.Lstat(name)
	return err == nil
}

// placeholderShaped reports whether p, reached through w, is what bwrap
// makes as a mask's mount point: an empty file or an empty directory. A
// registered placeholder that is not (another run's agent put a
// repository in its place) is not passed over as one.
func placeholderShaped(w hostfs.Walker, p string) bool {
	f, st, err := w.Open(p, func(st *unix.Stat_t) error {
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			return errors.ErrUnsupported
		}
		return nil
	})
	if err != nil {
		return false
	}
	defer f.Close()
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		return st.Size == 0
	}
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

// gitEntry is what newGitEntries found: a .git or commondir, or a
// directory that became a bare git directory.
type gitEntry struct {
	path string
	bare bool
	// changed: an older .git the search before the run did not see,
	// which changed during it (hostfs.Scan.Changed).
	changed bool
}

// newGitEntries returns the outermost new .git entries, the new commondir
// files outside them, and the directories that became git directories
// (isGitDir) whose config or hooks are new, that after holds: a .git, or
// a git directory's config and hooks, are new when neither before nor
// protected held them or anything below them.
func newGitEntries(before, after mounts.Snapshot, protected []string, isGitDir func(string) bool) []gitEntry {
	var found []gitEntry
	seen := mounts.NewPathSet()
	add := func(g gitEntry) {
		found = append(found, g)
		seen.Add(g.path)
	}
	known := knownBefore(before, protected)
	isNew := func(p string) bool { return !known.Has(p) && !known.HasBelow(p) }
	for _, q := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[q]; ok || seen.Covers(q) {
			continue
		}
		parts := strings.Split(q, "/")
		for i := range parts {
			if parts[i] != ".git" {
				continue
			}
			if p := strings.Join(parts[:i+1], "/"); isNew(p) {
				add(gitEntry{path: p})
				break
			}
		}
		if seen.Covers(q) {
			continue
		}
		switch dir := path.Dir(q); path.Base(q) {
		case "commondir":
			add(gitEntry{path: q})
		case "config", "hooks":
			if path.Base(dir) != ".git" && isNew(path.Join(dir, "config")) && isNew(path.Join(dir, "hooks")) && isGitDir(dir) {
				add(gitEntry{path: dir, bare: true})
			}
		}
	}
	return found
}

// knownBefore is what was there before the run: the snapshot's paths and
// those the jail protected (a path there, or one above what was, is no
// new git directory).
func knownBefore(before mounts.Snapshot, protected []string) *mounts.PathSet {
	known := mounts.NewPathSet(protected...)
	for q := range before {
		known.Add(q)
	}
	return known
}

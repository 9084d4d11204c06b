package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/policy"
)

// skipDirs are never searched for protected paths: .git is handled through
// its own entries (.git/hooks, .git/config and what git.go finds), the rest
// are large and hold no configuration an agent could plant.
var skipDirs = []string{".git", "node_modules"}

// protection is the outcome of searching the writable roots.
type protection struct {
	existing []string // paths to bind read-only over themselves
	// masks are paths to cover with an empty file: first missing
	// components, and the protected paths in a tmpfs of dirs.
	masks []string
	// dirs are missing directories that would directly hold protected
	// paths (a missing .claude, for .claude/settings.json): each is
	// covered with an empty tmpfs, in which those paths are masks. The
	// agent's tools then find a directory where they expect one (Claude
	// Code reports a .claude that is a file as a Settings Error), and
	// nothing written there reaches the host.
	dirs []string
	// links are symlinks that protected paths are, or lie beyond, below
	// their writable root: a mount cannot cover them (Render refuses them
	// unless the policy accepts them).
	links []string
	// pins are the directories between a writable root and what is
	// protected below it (the .git of .git/hooks, a submodule's work tree
	// and the directories above it) bound over themselves, writable: a
	// mount point cannot be renamed or removed (rename(2), rmdir(2):
	// EBUSY), so the agent cannot move a protected path's parent aside and
	// make a new, writable one in its place (the rename-parent bypass).
	pins []string
	// commondirs are missing commondir files of git directories, masked
	// with a file holding ".\n" rather than an empty one (git dies on an
	// empty commondir).
	commondirs []string
	// watched are paths that no mount can keep from being created, since
	// git takes even an empty file there for something (the .git of a
	// de-initialised submodule). The snapshots record them: one that
	// appears is a violation.
	watched []string
	// gitDirs are the .git directories of work trees under the roots,
	// recorded by the snapshots by type alone.
	gitDirs []string
	// unreadable are directories under a writable root the search could
	// not read (a mode the agent set, 0311): what is below them is
	// unknown. Render refuses them; the check after the run reports them.
	unreadable []string
	errs       []error // git files too large to read
}

// finder searches the writable roots for what must be protected.
type finder struct {
	d     Disk
	roots []string // sorted: the outermost root holding a path comes first
	// homes are where "~/" in a git path may lead: the homes of whoever
	// runs git on the host later (Input.OperatorHomes) and the run user's.
	homes []string
	pr    protection
	// seen are the entries of each of pr's lists: a path may be in two
	// (a protected directory is pinned too when a protected path below it
	// was found first, and must still be bound read-only).
	seen map[seen]bool
	git  gitState
	// holding maps a missing directory to the protected paths it would
	// hold directly (protection.dirs, decided once the search is over).
	holding map[string][]string
	// skipped are the directories the walk did not go into (skipDirs)
	// but .git.
	skipped []string
}

// findProtected looks for every relative protect pattern in each writable
// root and its subdirectories down to depth, adds the absolute entries that
// lie under a writable root and, when the patterns protect repositories
// (.git/config or .git/hooks, as every built-in profile does), what git
// reads configuration from or runs in every repository under the roots
// (git.go).
func findProtected(d Disk, roots, patterns []string, depth int, homes []string) protection {
	d = &statCache{Disk: d, m: map[string]statResult{}}
	f := &finder{d: d, roots: roots, homes: homes, seen: map[seen]bool{}, holding: map[string][]string{}, git: gitState{
		dirs: map[string]*gitDir{}, configs: map[string][]gitVar{}, tops: map[[2]string]bool{},
	}}
	var relative []string
	for _, p := range patterns {
		if !path.IsAbs(p) {
			relative = append(relative, p)
		} else if underAny(p, roots) {
			f.protect(p)
		}
	}
	git := slices.Contains(relative, ".git/config") || slices.Contains(relative, ".git/hooks")
	if git {
		f.globalConfigs()
	}
	for _, root := range roots {
		if git {
			f.enclosing(root)
		}
		f.walk(root, 0, func(dir string, names []string, level int) bool {
			if level <= depth {
				f.patterns(dir, names, relative, level == 0)
			}
			if !git {
				return level < depth
			}
			return f.repository(dir, names)
		})
	}
	// Handling a gitlink's repository may add work trees (and indexes).
	for i := 0; i < len(f.git.indexes); i++ {
		f.skippedLinks(f.git.indexes[i][0], f.git.indexes[i][1])
	}
	// A missing directory that is protected itself is masked whole, which
	// keeps what it would hold from being created too.
	for _, d := range slices.Sorted(maps.Keys(f.holding)) {
		if f.seen[seen{&f.pr.masks, d}] {
			continue
		}
		f.add(&f.pr.dirs, d)
		for _, p := range f.holding[d] {
			f.add(&f.pr.masks, p)
		}
	}
	// Nothing can be created inside a protected directory that exists (it
	// is bound read-only), so what is missing there needs no mask: one
	// would be a placeholder made and removed in the operator's directory
	// around every run (~/.codex/auth.json, protected as a credential,
	// inside a protected ~/.codex), which the snapshots then saw change.
	inside := f.insideExisting()
	f.pr.masks = slices.DeleteFunc(f.pr.masks, inside)
	f.pr.dirs = slices.DeleteFunc(f.pr.dirs, inside)
	f.pr.commondirs = slices.DeleteFunc(f.pr.commondirs, inside)
	return f.pr
}

// insideExisting says whether a path lies strictly inside a protected path
// that exists, with no writable root between the two (there the mask is
// kept: redundant under the read-only bind, which comes after every
// root's, never unsafe). It asks of each directory above the path, not
// of each protected path (an agent's tree may hold 100 000).
func (f *finder) insideExisting() func(p string) bool {
	existing := NewPathSet(f.pr.existing...)
	return func(p string) bool {
		for e := parent(p); e != ""; e = parent(e) {
			if existing.Has(e) && !slices.ContainsFunc(f.roots, func(r string) bool { return r != e && under(r, e) && under(p, r) }) {
				return true
			}
		}
		return false
	}
}

// seen is one entry of one of a finder's lists.
type seen struct {
	list *[]string
	path string
}

func (f *finder) add(list *[]string, p string) {
	if k := (seen{list, p}); !f.seen[k] {
		f.seen[k] = true
		*list = append(*list, p)
	}
}

// patterns protects what the relative patterns name in dir.
func (f *finder) patterns(dir string, names, patterns []string, top bool) {
	for _, pat := range patterns {
		found := present(f.d, dir, names, pat)
		if len(found) == 0 && !hasMeta(pat) && (top || insideExisting(f.d, dir, names, pat)) {
			// A literal is protected where it exists. Where it does not,
			// its first missing component is covered so that it cannot be
			// created: at the root for every name, and deeper inside a
			// protected directory that exists (the hooks of a nested
			// repository's .git). Any other protected name that appears
			// deeper during the run is found by comparing snapshots
			// (TakeSnapshot) and reported as a violation.
			found = []string{path.Join(dir, pat)}
		}
		for _, p := range found {
			f.protect(p)
		}
	}
}

// protect records p: read-only where it exists, masked where it does not,
// with every directory between its outermost writable root and it pinned.
// p may hold ".." and symlinks (a path git reads from a configuration
// file): it is followed as the kernel would. A mount cannot cover a
// symlink (it lands on the target, and the link stays replaceable), so when
// p is a link or passes through one below a writable root, the link is
// recorded instead, and the target is protected when it lies under a
// writable root.
func (f *finder) protect(p string) {
	target, link, err := follow(f.d, p, f.roots)
	if err != nil {
		return // a link loop: git cannot read there either
	}
	if link != "" {
		f.pinTo(link)
		f.add(&f.pr.links, link)
		if underAny(target, f.roots) && exists(f.d, target) {
			f.pinTo(target)
			f.add(&f.pr.existing, target)
		}
		return
	}
	p = target
	if !underAny(p, f.roots) {
		return
	}
	f.pinTo(p)
	if exists(f.d, p) {
		f.add(&f.pr.existing, p)
		return
	}
	m := firstMissing(f.d, p)
	parent := path.Dir(m)
	switch fi, err := lstat(f.d, parent); {
	case m == "" || !underAny(m, f.roots) || err != nil:
	case fi.IsDir() && m == path.Dir(p) && path.Base(m) != ".git":
		// A missing directory that would hold p: a tmpfs (dirs). A
		// missing .git stays a file (Input.GitFile), which git does not
		// take for a repository.
		if !slices.Contains(f.holding[m], p) {
			f.holding[m] = append(f.holding[m], p)
		}
	case fi.IsDir():
		f.add(&f.pr.masks, m)
	case underAny(parent, f.roots) && !slices.Contains(f.roots, parent):
		// bwrap cannot make a mount point below a file ("Can't mkdir
		// parents"); the file is made read-only instead, which keeps it
		// from being replaced by a directory holding p (a worktree's .git
		// file, for .git/hooks).
		f.add(&f.pr.existing, parent)
	}
}

// pinTo pins every real directory strictly between the outermost writable
// root holding p and p, stopping at anything else (a mount over a link
// lands on its target, and the link itself stays replaceable, which the
// snapshot comparison reports). Writable roots nested in that one are
// pinned again: binding a directory above one hides its bind.
func (f *finder) pinTo(p string) {
	i := slices.IndexFunc(f.roots, func(r string) bool { return under(p, r) })
	if i < 0 || f.roots[i] == p {
		return
	}
	root := f.roots[i]
	parts := strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, root), "/"), "/")
	for i := 1; i < len(parts); i++ {
		dir := path.Join(root, path.Join(parts[:i]...))
		if !isDir(f.d, dir) {
			return
		}
		f.add(&f.pr.pins, dir)
	}
}

// walk calls fn for dir and, while fn says so, every directory below it,
// with the names the directory holds and its depth below the root, without
// following symlinks or entering skipDirs. Each directory is read once:
// patterns are matched against its names (present) rather than looked up
// one by one.
func (f *finder) walk(dir string, level int, fn func(dir string, names []string, level int) bool) {
	entries, err := fs.ReadDir(f.d, rel(dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) && underAny(dir, f.roots) {
		f.add(&f.pr.unreadable, dir)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if !fn(dir, names, level) {
		return
	}
	gitDir := bare(names)
	for _, e := range entries {
		if !e.IsDir() || gitDir && (e.Name() == "objects" || e.Name() == "refs") {
			continue
		}
		if slices.Contains(skipDirs, e.Name()) {
			if e.Name() != ".git" { // git enters no path through a .git
				f.skipped = append(f.skipped, path.Join(dir, e.Name()))
			}
			continue
		}
		f.walk(path.Join(dir, e.Name()), level+1, fn)
	}
}

// insideExisting reports whether the relative pattern pat names something
// inside a directory dir holds (".git/hooks" where dir/.git is a real
// directory).
func insideExisting(d Disk, dir string, names []string, pat string) bool {
	first, _, nested := strings.Cut(pat, "/")
	if _, ok := slices.BinarySearch(names, first); !ok || !nested {
		return false
	}
	return isDir(d, path.Join(dir, first))
}

// isDir reports whether p is a directory, not a link to one.
func isDir(d Disk, p string) bool {
	fi, err := lstat(d, p)
	return err == nil && fi.IsDir()
}

// present returns the paths under dir that a relative pattern names and
// that exist. names (sorted, from walk) rule out most patterns without a
// system call.
func present(d Disk, dir string, names []string, pat string) []string {
	first, _, _ := strings.Cut(pat, "/")
	if !hasMeta(pat) {
		if _, ok := slices.BinarySearch(names, first); !ok || !exists(d, path.Join(dir, pat)) {
			return nil
		}
		return []string{path.Join(dir, pat)}
	}
	if !slices.ContainsFunc(names, func(n string) bool { ok, _ := path.Match(first, n); return ok }) {
		return nil
	}
	matches, _ := fs.Glob(d, rel(path.Join(dir, pat)))
	for i, m := range matches {
		matches[i] = "/" + m
	}
	return matches
}

// firstMissing returns the shortest prefix of p that does not exist, or ""
// if p exists.
func firstMissing(d Disk, p string) string {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		prefix := "/" + strings.Join(parts[:i+1], "/")
		if !exists(d, prefix) {
			return prefix
		}
	}
	return ""
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// under reports whether p is root or lies below it.
func under(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

func underAny(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return under(p, r) })
}

// statCache remembers what Lstat said for the length of one search, which
// asks about the same directories over and over (every path followed
// component by component, every pin checked).
type statCache struct {
	Disk
	m map[string]statResult
}

type statResult struct {
	fi  fs.FileInfo
	err error
}

func (c *statCache) Lstat(name string) (fs.FileInfo, error) {
	r, ok := c.m[name]
	if !ok {
		r.fi, r.err = c.Disk.Lstat(name)
		c.m[name] = r
	}
	return r.fi, r.err
}

// tooLarge is the error for a git file agentjail will not read whole.
func tooLarge(p string, size, max int64) error {
	return fmt.Errorf("%w: %s holds %d bytes, more than the %d agentjail reads to find the includes and hooks it must protect; if it is not yours, remove it",
		ErrGitFile, policy.Quote(p), size, max)
}

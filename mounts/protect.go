package mounts

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// skipDirs are never searched for protected paths: .git is handled through
// its own entries (.git/hooks, .git/config), the rest are large and hold no
// configuration an agent could plant.
var skipDirs = []string{".git", "node_modules"}

// protection is the outcome of searching the writable roots.
type protection struct {
	existing []string // paths to bind read-only over themselves
	masks    []string // first missing components to cover with an empty file
	// links are symlinks that protected paths are, or lie beyond, below
	// their writable root: a mount cannot cover them (Render refuses them
	// unless the policy accepts them).
	links []string
	// pins are directories inside a protected name (the .git of
	// .git/hooks) bound over themselves, writable: a mount point cannot be
	// renamed or removed (rename(2), rmdir(2): EBUSY), so the agent cannot
	// move .git aside with its read-only hooks and make a new, writable
	// one in its place (the rename-parent bypass).
	pins []string
}

// findProtected looks for every relative protect pattern in each writable
// root and its subdirectories down to depth, resolves `gitdir:` files, and
// adds the absolute entries that lie under a writable root.
func findProtected(d Disk, roots, patterns []string, depth int) protection {
	var pr protection
	seen := map[string]bool{}
	add := func(list *[]string, p string) {
		if !seen[p] {
			seen[p] = true
			*list = append(*list, p)
		}
	}
	var relative []string
	for _, p := range patterns {
		if !path.IsAbs(p) {
			relative = append(relative, p)
			continue
		}
		if underAny(p, roots) {
			pinBetween(d, deepestRoot(p, roots), p, &pr, add)
			protectOne(d, roots, p, &pr, add)
		}
	}
	for _, root := range roots {
		walkDirs(d, root, depth, func(dir string, names []string) {
			for _, pat := range relative {
				found := present(d, dir, names, pat)
				if len(found) == 0 && !hasMeta(pat) && (dir == root || insideExisting(d, dir, names, pat)) {
					// A literal is protected where it exists. Where it does
					// not, its first missing component is covered so that it
					// cannot be created: at the root for every name, and
					// deeper inside a protected directory that exists (the
					// hooks of a nested repository's .git). Any other
					// protected name that appears deeper during the run is
					// found by comparing snapshots (TakeSnapshot) and
					// reported as a violation.
					found = []string{path.Join(dir, pat)}
				}
				for _, p := range found {
					pinBetween(d, dir, p, &pr, add)
					protectOne(d, roots, p, &pr, add)
				}
			}
			for _, g := range gitdirTargets(d, dir) {
				for _, sub := range []string{"hooks", "config"} {
					if p := path.Join(g, sub); underAny(p, roots) && exists(d, p) {
						pinBetween(d, deepestRoot(p, roots), p, &pr, add)
						add(&pr.existing, p)
					}
				}
			}
			for _, h := range hooksPaths(d, dir) {
				if underAny(h, roots) {
					pinBetween(d, dir, h, &pr, add)
					protectOne(d, roots, h, &pr, add)
				}
			}
		})
	}
	return pr
}

// protectOne records p: read-only where it exists, masked where it does
// not. A mount cannot cover a symlink (it lands on the target, and the link
// stays replaceable), so when p is a link or lies beyond one below its
// writable root, the link is recorded instead, and the target is protected
// when it lies under a writable root.
func protectOne(d Disk, roots []string, p string, pr *protection, add func(*[]string, string)) {
	if l := linkOnPath(d, deepestRoot(p, roots), p); l != "" {
		add(&pr.links, l)
		if t, err := resolve(d, p); err == nil && t != p && underAny(t, roots) && exists(d, t) {
			add(&pr.existing, t)
		}
		return
	}
	if exists(d, p) {
		add(&pr.existing, p)
		return
	}
	// bwrap makes the mask's mount point, and cannot below a file (the
	// .git file of a worktree or submodule: "Can't mkdir parents").
	if m := firstMissing(d, p); m != "" && underAny(m, roots) && isDir(d, path.Dir(m)) {
		add(&pr.masks, m)
	}
}

// linkOnPath returns the first symlink on p's path below root (p itself
// included), or "".
func linkOnPath(d Disk, root, p string) string {
	if !under(p, root) || p == root {
		return ""
	}
	cur := root
	for _, name := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, root), "/"), "/") {
		cur = path.Join(cur, name)
		fi, err := lstat(d, cur)
		if err != nil {
			return ""
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return cur
		}
	}
	return ""
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

// pinBetween pins every real directory strictly between from and p (not
// through a symlink: a mount over a link lands on its target, and the link
// itself stays replaceable, which the snapshot comparison reports).
func pinBetween(d Disk, from, p string, pr *protection, add func(*[]string, string)) {
	rest, ok := strings.CutPrefix(p, from+"/")
	if !ok {
		return
	}
	parts := strings.Split(rest, "/")
	for i := 1; i < len(parts); i++ {
		dir := path.Join(from, path.Join(parts[:i]...))
		fi, err := lstat(d, dir)
		if err != nil || !fi.IsDir() {
			return
		}
		add(&pr.pins, dir)
	}
}

// deepestRoot is the innermost writable root holding p (roots may nest).
func deepestRoot(p string, roots []string) string {
	best := ""
	for _, r := range roots {
		if under(p, r) && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// walkDirs calls fn for root and every directory below it down to depth,
// with the names the directory holds, without following symlinks or
// entering skipDirs. Each directory is read once: patterns are matched
// against its names (present) rather than looked up one by one.
func walkDirs(d Disk, root string, depth int, fn func(dir string, names []string)) {
	entries, _ := fs.ReadDir(d, rel(root))
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	fn(root, names)
	if depth == 0 {
		return
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(skipDirs, e.Name()) {
			walkDirs(d, path.Join(root, e.Name()), depth-1, fn)
		}
	}
}

// present returns the paths under dir that a relative pattern names and
// that exist. names (sorted, from walkDirs) rule out most patterns without
// a system call.
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

// gitdirTargets reads a `.git` file ("gitdir: ../x/.git/worktrees/w") and
// returns the git directory it names and, for a worktree, the common
// directory that holds the hooks and config git actually uses.
func gitdirTargets(d Disk, dir string) []string {
	fi, err := lstat(d, path.Join(dir, ".git"))
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := fs.ReadFile(d, rel(path.Join(dir, ".git")))
	if err != nil {
		return nil
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	target, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir:")
	if !ok {
		return nil
	}
	g := absFrom(dir, strings.TrimSpace(target))
	out := []string{g}
	if common, err := fs.ReadFile(d, rel(path.Join(g, "commondir"))); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(common))
		if sc.Scan() {
			out = append(out, absFrom(g, strings.TrimSpace(sc.Text())))
		}
	}
	return out
}

// hooksPaths returns the hooks directories the repository at dir names
// with core.hooksPath (husky's .husky/_, a project's .githooks) in its
// .git/config or, for a worktree, its git directories' config: git runs
// the hooks there, so they need the protection of .git/hooks. A relative
// path is taken from dir, the top of the working tree, as git does for
// hooks (githooks(5)); "~/" paths, the operator's own, are left out.
func hooksPaths(d Disk, dir string) []string {
	configs := []string{path.Join(dir, ".git", "config")}
	for _, g := range gitdirTargets(d, dir) {
		configs = append(configs, path.Join(g, "config"))
	}
	var out []string
	for _, c := range configs {
		data, err := fs.ReadFile(d, rel(c))
		if err != nil {
			continue
		}
		section := ""
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "[") {
				section = strings.ToLower(strings.Trim(line, "[] \t"))
				continue
			}
			key, value, ok := strings.Cut(line, "=")
			if !ok || section != "core" || !strings.EqualFold(strings.TrimSpace(key), "hooksPath") {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			if value == "" || strings.HasPrefix(value, "~") {
				continue
			}
			if p := absFrom(dir, value); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func absFrom(dir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
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

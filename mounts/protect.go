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
	links    []string // protected paths that are symlinks (warned about)
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
			protectOne(d, roots, p, &pr, add)
		}
	}
	for _, root := range roots {
		walkDirs(d, root, depth, func(dir string) {
			for _, pat := range relative {
				full := path.Join(dir, pat)
				if !hasMeta(pat) {
					// A literal is protected where it exists; where it does
					// not, only at the root, its first missing component is
					// covered so that it cannot be created.
					if exists(d, full) || dir == root {
						protectOne(d, roots, full, &pr, add)
					}
					continue
				}
				matches, _ := fs.Glob(d, rel(full))
				for _, m := range matches {
					protectOne(d, roots, "/"+m, &pr, add)
				}
			}
			for _, g := range gitdirTargets(d, dir) {
				for _, sub := range []string{"hooks", "config"} {
					if p := path.Join(g, sub); underAny(p, roots) && exists(d, p) {
						add(&pr.existing, p)
					}
				}
			}
		})
	}
	return pr
}

// protectOne records p. A symlink cannot be covered (a mount over it lands
// on its target), so for a link the target is protected when it lies under a
// writable root, and the link is reported: the agent could still replace it.
func protectOne(d Disk, roots []string, p string, pr *protection, add func(*[]string, string)) {
	if !exists(d, p) {
		if m := firstMissing(d, p); m != "" && underAny(m, roots) {
			add(&pr.masks, m)
		}
		return
	}
	if !isLink(d, p) {
		add(&pr.existing, p)
		return
	}
	add(&pr.links, p)
	if t, err := resolve(d, p); err == nil && t != p && underAny(t, roots) && exists(d, t) {
		add(&pr.existing, t)
	}
}

// walkDirs calls fn for root and every directory below it down to depth,
// without following symlinks or entering skipDirs.
func walkDirs(d Disk, root string, depth int, fn func(dir string)) {
	fn(root)
	if depth == 0 {
		return
	}
	entries, err := fs.ReadDir(d, rel(root))
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(skipDirs, e.Name()) {
			walkDirs(d, path.Join(root, e.Name()), depth-1, fn)
		}
	}
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

func isLink(d Disk, p string) bool {
	fi, err := lstat(d, p)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// under reports whether p is root or lies below it.
func under(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

func underAny(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return under(p, r) })
}

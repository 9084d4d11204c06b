package mounts

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// What git reads configuration from or runs, for a repository whose work
// tree is TOP, git directory G and common directory C (G itself, or what
// G/commondir names: setup.c, get_common_dir_noenv):
//
//   - TOP/.git, a directory (G) or a file naming G ("gitdir: ...");
//   - G/commondir;
//   - C/config and, with extensions.worktreeConfig, G/config.worktree
//     (config.c, do_git_config_sequence), and every file they include,
//     include.path or includeIf.<condition>.path whatever the condition,
//     nested as deep as git follows (config.c, handle_path_include);
//   - C/hooks, or the directory core.hooksPath names (hook.c), and the
//     command core.fsmonitor names (fsmonitor.c), run in TOP;
//   - for a linked worktree, C/worktrees/<id> is its G, and
//     C/worktrees/<id>/gitdir names its TOP/.git (worktree.c);
//   - for a submodule, C/modules/<name> is its G (names may hold "/"), whose
//     core.worktree names its TOP, and whose own modules/ holds its
//     submodules.
//
// The finder reads these through the Disk as hostile input: a file is read
// only if it is a regular file, and at most maxGitFile bytes of it; what a
// file names is followed as the kernel would, and a symlink met under a
// writable root is reported as one (protect).

// maxGitFile bounds what is read of one git file: git itself refuses a
// .git file larger than this (setup.c, read_gitfile_gently); a config file
// that large is no one's.
const maxGitFile = 1 << 20

// maxIncludeDepth is how deep git follows includes (config.c,
// MAX_INCLUDE_DEPTH); it dies beyond.
const maxIncludeDepth = 10

// maxModuleNesting bounds the directories searched below a modules/
// directory for a submodule's git directory (a submodule named
// "third_party/libs/x" has it at modules/third_party/libs/x).
const maxModuleNesting = 16

// gitState is what the finder has seen of git.
type gitState struct {
	dirs    map[string]*gitDir  // by git directory
	configs map[string][]gitVar // by file, with what it includes
	tops    map[[2]string]bool  // (git directory, work tree) handled
	// indexes are the (git directory, work tree) whose index is read for
	// gitlinks once the walk is over (skippedLinks): only where it skipped
	// a directory it would have gone into.
	indexes [][2]string
	passwd  []byte
	// global is the configuration git reads for every repository from
	// the homes in a writable root (globalConfigs).
	global []gitVar
}

// gitDir is one git directory, scanned.
type gitDir struct {
	vars []gitVar // the configuration it reads, includes followed
}

// repository handles a directory of the walk: a work tree's top (it holds
// .git) or a bare repository. It reports whether the walk goes on below.
func (f *finder) repository(dir string, names []string) bool {
	if _, ok := slices.BinarySearch(names, ".git"); ok {
		f.repo(dir)
	}
	// Also where a .git is: git takes dir itself for a git directory when
	// its .git is none (an empty directory, a HEAD made garbage) and dir
	// holds HEAD, objects and refs (setup.c, setup_git_directory_gently_1).
	if bare(names) {
		// Searched below all the same (the walk skips its objects and
		// refs): an agent's HEAD, objects and refs, empty files, would
		// otherwise hide from the search the repositories and protected
		// names in what else the directory holds.
		f.gitdir(dir, "")
	}
	return true
}

// IsGitDir reports whether a directory whose entries has reports may be a
// git directory to git (setup.c, is_git_directory): it holds HEAD, and
// refs, or a commondir naming the directory that holds them. git asks for
// objects too, unless GIT_OBJECT_DIRECTORY names them elsewhere, which an
// operator's environment may: so objects is not asked here. Whatever they
// are: git asks only access(X_OK) of objects and refs, which a link to a
// directory passes (and an executable file), and the jail's agent chooses
// what they are. HEAD's removal ends it.
func IsGitDir(has func(name string) bool) bool {
	return has("HEAD") && (has("commondir") || has("refs"))
}

// bare is IsGitDir of a directory's entries, sorted.
func bare(names []string) bool {
	return IsGitDir(func(n string) bool { _, ok := slices.BinarySearch(names, n); return ok })
}

// isGitDir is IsGitDir of dir on d.
func isGitDir(d Disk, dir string) bool {
	return IsGitDir(func(n string) bool { return exists(d, path.Join(dir, n)) })
}

// enclosing handles the repository a writable root lies in, if any (git
// looks for it upwards, as here): its git directory is outside the root,
// but its submodules' and worktrees' work trees may be inside.
func (f *finder) enclosing(root string) {
	for dir := path.Dir(root); ; dir = path.Dir(dir) {
		if exists(f.d, path.Join(dir, ".git")) {
			f.repo(dir)
			return
		}
		if isGitDir(f.d, dir) {
			f.gitdir(dir, "")
			return
		}
		if dir == "/" {
			return
		}
	}
}

// repo handles the work tree top, which holds .git.
func (f *finder) repo(top string) {
	f.keepDotGit(top)
	t, err := resolve(f.d, path.Join(top, ".git"))
	if err != nil {
		return
	}
	fi, err := lstat(f.d, t)
	switch {
	case err != nil:
	case fi.IsDir():
		f.gitdir(t, top)
	case fi.Mode().IsRegular():
		// git joins a relative gitdir: to the .git file's directory as
		// it named it (top), not to where a link led.
		if g := f.gitfile(t); g != "" {
			f.gitdir(rawJoin(top, g), top)
		}
	}
}

// keepDotGit keeps the .git of the work tree top (a physical path), if top
// is a directory under a writable root: a directory is pinned, a file (a
// worktree's or a submodule's) made read-only, a link reported (protect).
// A missing one (a de-initialised submodule's) is watched, not masked: git
// takes an empty .git file for a broken repository and stops ("invalid
// gitfile format"), in the jail and, while the placeholder exists, on the
// host.
func (f *finder) keepDotGit(top string) {
	if !isDir(f.d, top) || !underAny(top, f.roots) {
		return
	}
	p := path.Join(top, ".git")
	fi, err := lstat(f.d, p)
	switch {
	case err == nil && fi.IsDir():
		f.pinTo(p)
		if !slices.Contains(f.roots, p) {
			f.add(&f.pr.pins, p)
		}
		// The snapshots record that it is there (its type alone: what
		// it holds changes with every commit): one that is new is
		// moved aside, empty as it may be.
		f.add(&f.pr.gitDirs, p)
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		f.pinTo(p)
		f.add(&f.pr.links, p)
	case err == nil:
		f.protect(p)
	default:
		f.pinTo(p)
		f.add(&f.pr.watched, p)
	}
}

// locate follows raw (which may hold ".." and links) to where it leads,
// reporting a link met under a writable root as protect does; "" when it
// cannot be followed.
func (f *finder) locate(raw string) string {
	t, link, err := follow(f.d, raw, f.roots)
	if err != nil {
		return ""
	}
	if link != "" {
		f.pinTo(link)
		f.add(&f.pr.links, link)
	}
	return t
}

// gitdir handles the git directory raw of the work tree top ("" when not
// known from where it was found). One that is missing, or is a file, under
// a writable root is made uncreatable, or read-only: whatever named it (a
// read-only .git file, commondir) would lead git to what the agent made
// there.
func (f *finder) gitdir(raw, top string) *gitDir {
	g := f.locate(raw)
	if g == "" {
		return nil
	}
	if !isDir(f.d, g) {
		f.protect(g)
		return nil
	}
	gd := f.git.dirs[g]
	if gd == nil {
		gd = f.scan(g)
	}
	if top != "" {
		f.top(g, gd, top)
	}
	return gd
}

// scan reads the git directory g: its common directory, configuration and
// hooks, and finds its linked worktrees and submodules.
func (f *finder) scan(g string) *gitDir {
	gd := &gitDir{}
	f.git.dirs[g] = gd
	common := g
	cd := path.Join(g, "commondir")
	if exists(f.d, cd) {
		f.protect(cd)
		data := f.read(cd)
		// get_common_dir_noenv: line ends trimmed; a C string.
		s := strings.TrimRight(string(data), "\r\n")
		s, _, _ = strings.Cut(s, "\x00")
		if s != "" {
			if c := f.locate(rawJoin(g, s)); c != "" {
				common = c
			}
		}
	} else if underAny(cd, f.roots) {
		// git dies on an empty commondir, so no empty mask will do; a
		// file naming the git directory itself (".", Input.CommonDirFile)
		// leaves git's common directory where it is, and the agent cannot
		// make one that names a directory of its own.
		f.pinTo(cd)
		f.add(&f.pr.commondirs, cd)
	}
	if common != g {
		// The common directory's own hooks, config, worktrees and
		// submodules; a linked worktree reads its config too.
		if c := f.gitdir(common, ""); c != nil {
			gd.vars = append(gd.vars, c.vars...)
		}
	} else {
		f.protect(path.Join(g, "hooks"))
		f.protect(path.Join(g, "config"))
		gd.vars = f.config(path.Join(g, "config"), 0)
	}
	// config.worktree is read only with extensions.worktreeConfig, set in
	// the (read-only) common config: masked then; otherwise one that
	// appears is a violation, since a later `git config
	// extensions.worktreeConfig true` would read it.
	wc := path.Join(g, "config.worktree")
	if exists(f.d, wc) || lastBool(gd.vars, "extensions.worktreeconfig") {
		f.protect(wc)
		gd.vars = append(gd.vars, f.config(wc, 0)...)
	} else if underAny(wc, f.roots) {
		f.add(&f.pr.watched, wc)
	}
	// Where this git directory's work trees are.
	var tops []string
	if common != g {
		// A linked worktree's: C/worktrees/<id>/gitdir names its .git.
		p := path.Join(g, "gitdir")
		if exists(f.d, p) {
			f.protect(p)
			data := f.read(p)
			if s := strings.TrimSpace(string(data)); s != "" {
				tops = append(tops, strings.TrimSuffix(rawJoin(g, s), "/.git"))
			}
		}
	} else if path.Base(g) == ".git" {
		tops = append(tops, path.Dir(g))
	}
	for _, v := range gd.vars {
		if v.name == "core.worktree" && v.set && v.value != "" {
			tops = append(tops, rawJoin(g, v.value))
		}
	}
	if len(tops) == 0 && common == g {
		tops = append(tops, g) // bare: hooks run in the git directory
	}
	for _, t := range tops {
		if t := f.locate(t); t != "" {
			f.top(g, gd, t)
		}
	}
	if common == g {
		entries, _ := fs.ReadDir(f.d, rel(path.Join(g, "worktrees")))
		for _, e := range entries {
			if e.IsDir() {
				f.gitdir(path.Join(g, "worktrees", e.Name()), "")
			}
		}
		f.modules(path.Join(g, "modules"), 0)
	}
	return gd
}

// top handles a work tree of the git directory g: its .git, and the hooks
// and fsmonitor command that g's configuration names, relative to it.
func (f *finder) top(g string, gd *gitDir, top string) {
	if f.git.tops[[2]string{g, top}] {
		return
	}
	f.git.tops[[2]string{g, top}] = true
	if top != g {
		f.keepDotGit(top)
		f.git.indexes = append(f.git.indexes, [2]string{g, top})
	}
	for _, v := range append(slices.Clip(f.git.global), gd.vars...) {
		switch {
		case !v.set || v.value == "":
		case v.name == "core.hookspath":
			for _, p := range f.gitPaths(v.value, top) {
				f.protect(p)
			}
		case v.name == "core.fsmonitor":
			// A boolean selects git's own daemon; anything else is a
			// command, run directly when it holds none of the shell's
			// characters (run-command.c, prepare_shell_cmd): a path, in
			// the work tree when relative, or a name looked up in PATH.
			// A shell command line is the project's own code, like a
			// Makefile: not followed.
			_, isBool := gitBool(v)
			if isBool || !strings.Contains(v.value, "/") || strings.ContainsAny(v.value, "|&;<>()$`\\\"' \t\n*?[#=%") {
				continue
			}
			for _, p := range f.gitPaths(v.value, top) {
				f.protect(p)
			}
		}
	}
}

// modules finds the git directories of submodules below dir (a modules/
// directory, or a directory of a submodule name holding "/").
func (f *finder) modules(dir string, level int) {
	entries, _ := fs.ReadDir(f.d, rel(dir))
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := path.Join(dir, e.Name())
		if exists(f.d, path.Join(p, "HEAD")) || exists(f.d, path.Join(p, "commondir")) {
			f.gitdir(p, "")
		} else if level < maxModuleNesting {
			f.modules(p, level+1)
		}
	}
}

// config protects every file the configuration file p includes, at any
// depth, and returns the variables p and they set, in git's order.
func (f *finder) config(p string, depth int) []gitVar {
	if vars, ok := f.git.configs[p]; ok {
		return vars
	}
	f.git.configs[p] = nil // an include loop ends here; git dies on it
	data := f.read(p)
	var out []gitVar
	for _, v := range parseGitConfig(data) {
		out = append(out, v)
		if !v.set || v.name != "include.path" && !(strings.HasPrefix(v.name, "includeif.") && strings.HasSuffix(v.name, ".path") && strings.Count(v.name, ".") >= 2) {
			continue
		}
		// handle_path_include: a relative path is taken from the
		// including file's directory; a missing file is skipped, so a
		// missing one is masked.
		for _, t := range f.gitPaths(v.value, path.Dir(p)) {
			f.protect(t)
			if depth < maxIncludeDepth {
				if t, err := resolve(f.d, t); err == nil {
					out = append(out, f.config(t, depth+1)...)
				}
			}
		}
	}
	f.git.configs[p] = out
	return out
}

// gitPaths expands a path from a git configuration as git's
// interpolate_path does, for every home "~/" may name, and joins a
// relative one to base. "%(prefix)/", git's installation, yields nothing.
func (f *finder) gitPaths(v, base string) []string {
	switch {
	case v == "" || strings.HasPrefix(v, "%(prefix)/"):
		return nil
	case v == "~" || strings.HasPrefix(v, "~/"):
		var out []string
		for _, h := range f.homes {
			out = append(out, h+v[1:])
		}
		return out
	case v[0] == '~':
		name, rest, _ := strings.Cut(v[1:], "/")
		if h := f.userHome(name); h != "" {
			return []string{h + "/" + rest}
		}
		return nil
	}
	return []string{rawJoin(base, v)}
}

// userHome is the home of the user name in /etc/passwd, or "".
func (f *finder) userHome(name string) string {
	if f.git.passwd == nil {
		data, _ := readFile(f.d, "/etc/passwd")
		f.git.passwd = append([]byte{}, data...)
	}
	for line := range bytes.Lines(f.git.passwd) {
		fields := strings.Split(strings.TrimRight(string(line), "\n"), ":")
		if len(fields) >= 6 && fields[0] == name && path.IsAbs(fields[5]) {
			return fields[5]
		}
	}
	return ""
}

// gitfile reads a .git file as git's read_gitfile_gently does and returns
// the path after "gitdir: ", or "".
func (f *finder) gitfile(p string) string {
	data := f.read(p)
	if !bytes.HasPrefix(data, []byte("gitdir: ")) {
		return ""
	}
	data = bytes.TrimRight(data, "\r\n")
	if len(data) < 9 {
		return ""
	}
	dir, _, _ := bytes.Cut(data[8:], []byte{0}) // used as a C string
	return string(dir)
}

// read returns the contents of the regular file p, links in its path
// followed (through the Disk, never by the host's open), or nil when it is
// missing, not a regular file or not readable. A file larger than
// maxGitFile is an error (Render refuses the run): what it says cannot be
// known.
func (f *finder) read(p string) []byte {
	data, err := readFile(f.d, p)
	if err != nil {
		f.pr.errs = append(f.pr.errs, err)
	}
	return data
}

// readFile is read without the errors' record; a file too large is
// ErrGitFile.
func readFile(d Disk, p string) ([]byte, error) { return readFileMax(d, p, maxGitFile) }

// readFileMax is readFile with max in place of maxGitFile.
func readFileMax(d Disk, p string, max int64) ([]byte, error) {
	file, t, err := openFile(d, p, max)
	if file == nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if int64(len(data)) > max {
		return nil, tooLarge(t, int64(len(data)), max)
	}
	if err != nil {
		return nil, nil
	}
	return data, nil
}

// openFile opens p, links resolved as the kernel would, if it is a regular
// file (nil if not, or missing), and returns the path it resolved to. One
// of more than max bytes is ErrGitFile.
func openFile(d Disk, p string, max int64) (fs.File, string, error) {
	t, err := resolve(d, p)
	if err != nil {
		return nil, "", nil
	}
	fi, err := lstat(d, t)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, "", nil
	}
	if fi.Size() > max {
		return nil, "", tooLarge(t, fi.Size(), max)
	}
	file, err := d.Open(rel(t))
	if err != nil {
		return nil, "", nil
	}
	// Between the lstat and the open the file may have been replaced (by
	// a FIFO, say: the Disk opens without blocking, see cmd/agentjail).
	if now, err := file.Stat(); err != nil || !now.Mode().IsRegular() || !sameFile(fi, now) {
		file.Close()
		return nil, "", nil
	}
	return file, t, nil
}

// sameFile compares device and inode where the Disk gives them.
func sameFile(a, b fs.FileInfo) bool {
	x, ok1 := a.Sys().(*syscall.Stat_t)
	y, ok2 := b.Sys().(*syscall.Stat_t)
	return !ok1 || !ok2 || x.Dev == y.Dev && x.Ino == y.Ino
}

// lastBool reports whether the last setting of name in vars reads as true
// to git; one git would die on counts as true.
func lastBool(vars []gitVar, name string) bool {
	for i := len(vars) - 1; i >= 0; i-- {
		if vars[i].name == name {
			v, ok := gitBool(vars[i])
			return v || !ok
		}
	}
	return false
}

// rawJoin joins a relative path to dir as git does, by string: ".." and
// links are left to follow.
func rawJoin(dir, p string) string {
	if path.IsAbs(p) {
		return p
	}
	return dir + "/" + p
}

package mounts

import (
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/agentjail/agentjail/policy"
)

// ClaudeHome is a run's private Claude Code directory.
type ClaudeHome struct {
	Dir  string // on the host (Input.ClaudeDir)
	Jail string // in the jail, ~/.claude: CLAUDE_CONFIG_DIR's value
	// Credentials is the operator's credentials file whose login is
	// copied in as Dir/.credentials.json (its access token only, made by
	// claude.LoginForRun), "" when there is none.
	Credentials string
	// Settings is the operator's settings.json whose allowed keys are
	// copied in and bound read-only at Jail/settings.json
	// (claude.SettingsForRun), "" when there is none.
	Settings string
	// Sessions is what is bound at Jail/projects (Input.ClaudeSessions).
	Sessions string
}

// CodexHome is a run's private Codex directory.
type CodexHome struct {
	Dir  string // on the host (Input.CodexDir)
	Jail string // in the jail, ~/.codex: CODEX_HOME's value
	// Auth is the operator's auth.json whose login is copied in as
	// Dir/auth.json (codex.AuthForRun), "" when there is none.
	Auth string
}

// Claude Code's files: its credentials under its directory, its global
// configuration next to it in the home (inside CLAUDE_CONFIG_DIR when that
// is set); Codex's login in its directory.
const (
	ClaudeCredentials = ".credentials.json"
	ClaudeConfig      = ".claude.json"
	ClaudeSettings    = "settings.json"
	CodexAuth         = "auth.json"
)

// ClaudeCarried are what claude.settings carries of the operator's Claude
// Code directory, read-only: the files and trees Claude Code 2.1.197 reads
// from CLAUDE_CONFIG_DIR (measured: each reached the model), its settings
// (filtered) and memory, its custom commands, subagents and skills. Its
// sessions, history, todos, plugins and the rest stay out.
var ClaudeCarried = []string{ClaudeSettings, "CLAUDE.md", "commands", "agents", "skills"}

// claudeSource is the operator's home the run's Claude Code files come
// from, all of them from one: the first that has a login, else the first
// with a ~/.claude directory or a ~/.claude.json (a home listed earlier
// wins over one that has only an empty ~/.claude).
func (r *renderer) claudeSource() string {
	has := func(h, name string, dir bool) bool {
		fi, err := fs.Stat(r.in.Disk, rel(path.Join(h, name)))
		return err == nil && fi.IsDir() == dir
	}
	for _, h := range r.in.OperatorHomes {
		if has(h, path.Join(".claude", ClaudeCredentials), false) {
			return h
		}
	}
	for _, h := range r.in.OperatorHomes {
		if has(h, ".claude", true) || has(h, ClaudeConfig, false) {
			return h
		}
	}
	return ""
}

// claude binds the run's private Claude Code directory at ~/.claude (the
// home is a tmpfs, so bwrap can make the mount point) and plans what goes
// into it from the operator's home claudeSource: the login and
// ~/.claude.json, copied in writable (claude rewrites both), and what
// claude.settings carries, copied apart and bound over it read-only, so
// that the agent can change none of it for the rest of the run. With
// claude.dir, the sessions directory is bound at ~/.claude/projects.
func (r *renderer) claude(roots []string) {
	c := r.p.Claude
	if !policy.On(c.Home) || r.in.ClaudeDir == "" {
		return
	}
	home := &ClaudeHome{Dir: r.in.ClaudeDir, Jail: path.Join(r.plan.Home, ".claude"), Sessions: r.in.ClaudeSessions}
	if !r.agentDirFits("Claude", home.Jail, roots, "claude: {home: false}") {
		return
	}
	r.plan.Dirs = append(r.plan.Dirs, Dir{Path: home.Dir, Size: r.homeSize()})
	src := r.claudeSource()
	// file copies the operator's src/name to dst when it is a regular file
	// (or a directory, for a tree) not reached through a planted link.
	file := func(name, dst string, tree bool) string {
		p := path.Join(src, name)
		if src == "" || !exists(r.in.Disk, p) || r.plantedLink(p, roots) != "" {
			return ""
		}
		if fi, err := fs.Stat(r.in.Disk, rel(p)); err != nil || fi.IsDir() != tree || !tree && !fi.Mode().IsRegular() {
			return ""
		}
		r.plan.Copies = append(r.plan.Copies, Copy{Src: p, Dst: dst})
		return p
	}
	if policy.On(c.Credentials) {
		home.Credentials = file(path.Join(".claude", ClaudeCredentials), path.Join(home.Dir, ClaudeCredentials), false)
		file(ClaudeConfig, path.Join(home.Dir, ClaudeConfig), false)
	}
	r.mount("--bind", home.Dir, home.Jail)
	if policy.On(c.Settings) && r.in.ClaudeConfigDir != "" {
		for _, name := range ClaudeCarried {
			copied := path.Join(r.in.ClaudeConfigDir, name)
			p := file(path.Join(".claude", name), copied, name == "commands" || name == "agents" || name == "skills")
			if p == "" {
				continue
			}
			if name == ClaudeSettings {
				home.Settings = p
			}
			r.mount("--ro-bind", copied, path.Join(home.Jail, name))
		}
	}
	if home.Sessions != "" {
		r.mount("--bind", home.Sessions, path.Join(home.Jail, "projects"))
	}
	r.plan.Claude = home
}

// codex binds the run's private Codex directory at ~/.codex, with the
// operator's auth.json copied in (codex.credentials), from the first of
// the operator's homes that has one.
func (r *renderer) codex(roots []string) {
	c := r.p.Codex
	if !policy.On(c.Home) || r.in.CodexDir == "" {
		return
	}
	home := &CodexHome{Dir: r.in.CodexDir, Jail: path.Join(r.plan.Home, ".codex")}
	if !r.agentDirFits("Codex", home.Jail, roots, "codex: {home: false}") {
		return
	}
	r.plan.Dirs = append(r.plan.Dirs, Dir{Path: home.Dir, Size: r.homeSize()})
	if policy.On(c.Credentials) {
		for _, h := range r.in.OperatorHomes {
			src := path.Join(h, ".codex", CodexAuth)
			if !exists(r.in.Disk, src) {
				continue
			}
			if fi, err := fs.Stat(r.in.Disk, rel(src)); err == nil && fi.Mode().IsRegular() && r.plantedLink(src, roots) == "" {
				r.plan.Copies = append(r.plan.Copies, Copy{Src: src, Dst: path.Join(home.Dir, CodexAuth)})
				home.Auth = src
			}
			break
		}
	}
	r.mount("--bind", home.Dir, home.Jail)
	r.plan.Codex = home
}

// agentDirFits reports whether an agent's private directory can be
// mounted at jail: under a writable root or a read-only bind the mount
// point is the host's own directory, which must exist (under a writable
// root a missing one is masked as a protected name, and bwrap would fail
// with "Can't mkdir ...: Not a directory"; in a read-only bind with
// "Read-only file system").
func (r *renderer) agentDirFits(agent, jail string, roots []string, off string) bool {
	where := "a writable root"
	if !underAny(jail, roots) {
		if !slices.ContainsFunc(r.p.Filesystem.Read, func(rd string) bool { return under(jail, rd) && exists(r.in.Disk, rd) }) {
			return true
		}
		where = "a read-only bind (filesystem.read, --read)"
	}
	if fi, err := fs.Stat(r.in.Disk, rel(jail)); err == nil && fi.IsDir() {
		return true
	}
	r.errs = append(r.errs, fmt.Errorf("the run's %s directory %s lies under %s and is not a directory; create it (`mkdir %s`, owned by the run user) or set `%s`",
		agent, jail, where, jail, off))
	return false
}

// homeSize caps an agent's private directory as the private home is.
func (r *renderer) homeSize() int64 {
	if s := r.p.Filesystem.Home.Size; s != nil {
		return int64(*s)
	}
	return DefaultHomeSize
}

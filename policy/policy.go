package policy

// Policy is one profile: what the jailed agent may see, write and run, and
// how long it may run. Scalars are pointers or strings so that a profile
// that `extends:` another can tell "not set" from "set to the zero value".
//
// Field comments are the reference documentation; schema.json repeats them
// for editors and a test keeps the two in step.
type Policy struct {
	// Extends names one built-in profile or a YAML file (relative to the
	// extending file) whose settings this profile starts from.
	Extends string `yaml:"extends,omitempty" json:"extends,omitempty"`
	// Description is one line for `agentjail profiles`.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// User is the run user, a name or a numeric uid. Empty means: --user,
	// then $SUDO_UID, then the owner of the start directory, then nobody.
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// InnerSandbox is "free" (the agent may build its own namespaces: Claude
	// Code's and Codex's sandboxes work) or "sealed" (no new namespaces).
	InnerSandbox string `yaml:"inner_sandbox,omitempty" json:"inner_sandbox,omitempty"`

	Filesystem  Filesystem  `yaml:"filesystem,omitempty" json:"filesystem,omitempty"`
	Network     Network     `yaml:"network,omitempty" json:"network,omitempty"`
	Environment Environment `yaml:"environment,omitempty" json:"environment,omitempty"`
	Seccomp     Seccomp     `yaml:"seccomp,omitempty" json:"seccomp,omitempty"`
	Limits      Limits      `yaml:"limits,omitempty" json:"limits,omitempty"`
	Claude      Claude      `yaml:"claude,omitempty" json:"claude,omitempty"`
	Codex       Codex       `yaml:"codex,omitempty" json:"codex,omitempty"`

	// Origins maps a field path ("filesystem.write[2]") to where its value
	// came from ("profiles/tier1.yaml:12:5", "--write"). Filled by Load and
	// by Overlay; error messages use it.
	Origins Origins `yaml:"-" json:"-"`
	// Fields maps a field path to the path it has in the file (or among
	// the flags) that set it, where the two differ: the entries of a list
	// that a parent's entries, or an expansion, moved ("filesystem.read[6]"
	// → "filesystem.read[0]"). Error messages name a field by it, beside
	// its origin.
	Fields map[string]string `yaml:"-" json:"-"`
}

// Base values for Filesystem.Base.
const (
	BaseHost    = "host"    // the host's / bound read-only
	BaseMinimal = "minimal" // only /usr, /etc and the library and binary dirs, read-only
)

// Values for Filesystem.Proc.
const (
	ProcFresh       = "fresh"
	ProcFreshOrBind = "fresh-or-bind"
)

// Values for Policy.InnerSandbox.
const (
	InnerFree   = "free"
	InnerSealed = "sealed"
)

// Filesystem is the jail's view of the disk. Paths may start with ~ or use
// ${HOME} (every home whose secrets are at stake) and ${PWD}.
type Filesystem struct {
	// Base is "host" (default) or "minimal".
	Base string `yaml:"base,omitempty" json:"base,omitempty"`
	// Proc is "fresh" (default: a new /proc that shows only the jail's
	// processes; when the host masks parts of its own /proc, as container
	// runtimes do, a fresh one cannot be mounted and the run fails) or
	// "fresh-or-bind": then bind the existing /proc instead, a degradation
	// the run prints and records (the agent sees the processes of the pid
	// namespace agentjail runs in, and its own sandbox works only without a
	// fresh /proc). A profile that says "fresh" keeps its children from
	// allowing the fallback.
	Proc string `yaml:"proc,omitempty" json:"proc,omitempty"`
	// Read lists extra paths bound read-only (useful with base: minimal).
	Read []string `yaml:"read,omitempty" json:"read,omitempty"`
	// Write lists the writable roots.
	Write []string `yaml:"write,omitempty" json:"write,omitempty"`
	// Protect lists paths kept read-only even under a writable root: a
	// relative entry (a name or a glob such as ".env.*", or "dir/name") is
	// looked for in every writable root down to ProtectDepth directories; an
	// absolute entry is protected where it is.
	Protect []string `yaml:"protect,omitempty" json:"protect,omitempty"`
	// ProtectDepth is how many directories below a writable root relative
	// protect entries are searched for (default 3). A child profile cannot
	// lower its parent's depth.
	ProtectDepth *int `yaml:"protect_depth,omitempty" json:"protect_depth,omitempty"`
	// AcceptProtectedSymlinks accepts protected paths under a writable root
	// that are symbolic links or lie beyond one (.git/hooks -> ../.githooks,
	// .env -> .env.real). A mount cannot cover a link: the link's target is
	// made read-only, but the agent can remove the link and put a real file
	// or directory in its place, which only the post-run check reports
	// (reason violation, exit 125), leaving it there. Default false: such a
	// run is refused, naming the link. A child cannot set it when its parent
	// sets false.
	AcceptProtectedSymlinks *bool `yaml:"accept_protected_symlinks,omitempty" json:"accept_protected_symlinks,omitempty"`
	// Deny lists paths hidden from the agent: an empty read-only directory
	// over a directory, /dev/null over a file.
	Deny []string `yaml:"deny,omitempty" json:"deny,omitempty"`
	// Tmpfs maps a mount point to a size-capped tmpfs.
	Tmpfs map[string]Tmpfs `yaml:"tmpfs,omitempty" json:"tmpfs,omitempty"`
	// Home gives the agent a private, writable home (a capped tmpfs at the
	// run user's home) instead of the host's, read-only.
	Home Home `yaml:"home,omitempty" json:"home,omitempty"`
	// Credentials lists paths (normally under ~) that appear in the agent's
	// home: bound read-only when the run user can read them, else copied in,
	// owned by the run user, and never written back.
	Credentials []string `yaml:"credentials,omitempty" json:"credentials,omitempty"`
}

// Tmpfs is one size-capped tmpfs mount.
type Tmpfs struct {
	Size Size `yaml:"size,omitempty" json:"size,omitempty"`
	Mode Mode `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// Home configures the agent's home directory.
type Home struct {
	// Private mounts a capped tmpfs as the run user's home.
	Private *bool `yaml:"private,omitempty" json:"private,omitempty"`
	// Size caps it.
	Size *Size `yaml:"size,omitempty" json:"size,omitempty"`
}

// Environment decides the jail's environment. Only allowed variables pass;
// Set adds or replaces, Unset removes. AlwaysUnset (CLAUDECODE and the
// variables of an enclosing Claude Code session) are always removed.
type Environment struct {
	// Allow lists variable names; a trailing * matches a prefix (LC_*),
	// but never a credential of the host or its CI job (GITHUB_TOKEN,
	// OTEL_EXPORTER_OTLP_HEADERS, ...: IsHostCredential), which passes
	// only by its exact name.
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	// Set maps names to values.
	Set map[string]string `yaml:"set,omitempty" json:"set,omitempty"`
	// Unset lists names removed even when allowed or set by a parent.
	Unset []string `yaml:"unset,omitempty" json:"unset,omitempty"`
}

// Seccomp is the profile's system-call filter.
type Seccomp struct {
	// Default enables the built-in denials of every tier (default true).
	Default *bool `yaml:"default,omitempty" json:"default,omitempty"`
	// Files lists Docker/OCI seccomp JSON files applied on top; each is a
	// separate filter and the stricter answer wins.
	Files []string `yaml:"files,omitempty" json:"files,omitempty"`
}

// Limits bounds a run. The supervisor enforces them.
type Limits struct {
	// Wall is the wall-clock limit (0: none).
	Wall *Duration `yaml:"wall,omitempty" json:"wall,omitempty"`
	// Idle is the longest time without a byte on stdout or stderr (0: none).
	Idle *Duration `yaml:"idle,omitempty" json:"idle,omitempty"`
	// Grace is the time between SIGTERM and SIGKILL.
	Grace *Duration `yaml:"grace,omitempty" json:"grace,omitempty"`
	// Interactive are the wall and idle limits of a run on a terminal of
	// its own (a person at it): they replace Wall and Idle there.
	Interactive Interactive `yaml:"interactive,omitempty" json:"interactive,omitempty"`
	// Output caps what the run record keeps of each stream.
	Output Output `yaml:"output,omitempty" json:"output,omitempty"`
	// Rlimits maps a resource (nofile, nproc, fsize, core, as, ...) to its
	// limit, applied to bwrap and so to the whole jail.
	Rlimits Rlimits `yaml:"rlimits,omitempty" json:"rlimits,omitempty"`
	// Pids caps the tasks (processes and threads) of the whole jail at
	// once: the run's cgroup's pids.max. A run that reaches it is ended
	// (reason pids_limit). Without a pids controller it becomes the
	// rlimit nproc (which, since Linux 5.14, counts the tasks of the run
	// user in the jail's user namespace); reaching that is not seen.
	Pids *int `yaml:"pids,omitempty" json:"pids,omitempty"`
	// Memory caps the memory of the whole jail, tmpfs files included
	// (inner ones too): the run's cgroup's memory.max, as a size or a
	// percentage of the host's RAM. A run in which the kernel kills a
	// process for it is ended (reason memory_limit).
	Memory *Memory `yaml:"memory,omitempty" json:"memory,omitempty"`
	// Swap is how much the jail may swap out beyond Memory (default 0:
	// swapped tmpfs pages would otherwise escape the cap). Needs Memory.
	Swap *Size `yaml:"swap,omitempty" json:"swap,omitempty"`
}

// Interactive bounds a run with a person at its terminal, where the
// operator's typing counts as activity too. Unset: Wall and Idle apply.
type Interactive struct {
	Wall *Duration `yaml:"wall,omitempty" json:"wall,omitempty"`
	Idle *Duration `yaml:"idle,omitempty" json:"idle,omitempty"`
}

// Output caps the head and tail kept of each stream for the record.
type Output struct {
	Head *Size `yaml:"head,omitempty" json:"head,omitempty"`
	Tail *Size `yaml:"tail,omitempty" json:"tail,omitempty"`
}

// Claude is what a jail provides for Claude Code. It applies to every run
// of the profile, whatever the command, since a script may run claude.
type Claude struct {
	// Home gives each run a private, writable Claude Code configuration
	// directory: ~/.claude in the jail, CLAUDE_CONFIG_DIR pointing at it,
	// kept on the host in agentjail's per-run state directory while the run
	// lasts. Claude writes its settings, sessions and transcripts there,
	// never into the operator's ~/.claude. Needs filesystem.home.private.
	Home *bool `yaml:"home,omitempty" json:"home,omitempty"`
	// Credentials copies the operator's ~/.claude/.credentials.json and
	// ~/.claude.json into that directory, owned by the run user (a root-owned
	// 0600 file bound in would be unreadable to it, and claude rewrites
	// both): of the login, only its access token (claude.LoginForRun). Nothing
	// is copied back. API-key or CLAUDE_CODE_OAUTH_TOKEN auth through the
	// environment needs none of this.
	Credentials *bool `yaml:"credentials,omitempty" json:"credentials,omitempty"`
	// Settings carries the operator's Claude Code configuration into that
	// directory, read-only, from the first of the operator's homes that
	// has each: ~/.claude/settings.json (of it only the keys that neither
	// run commands, hold or make credentials, nor send data out:
	// claude.SettingsForRun), CLAUDE.md, commands/, agents/ and skills/.
	// Needs home.
	Settings *bool `yaml:"settings,omitempty" json:"settings,omitempty"`
	// Dir keeps Claude Code's sessions between runs (--claude-dir): an
	// absolute directory, agentjail's user's own and mode 0700 (made so
	// when missing), whose projects/ (the session transcripts) is the
	// private directory's projects/, so that `claude --resume` and
	// `--continue` find the sessions of earlier runs. Nothing else in it is
	// read: the configuration and the login are copied in afresh each run.
	// Needs home.
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
}

// Codex is what a jail provides for the Codex CLI, whatever the command.
type Codex struct {
	// Home gives each run a private, writable Codex directory: ~/.codex in
	// the jail (on the private home, never under /tmp: Codex's sandbox on
	// bubblewrap older than 0.9 runs a helper from there, which it refuses
	// to make under the temporary directory), CODEX_HOME pointing at it,
	// kept on the host in agentjail's per-run state directory while the run
	// lasts. Needs filesystem.home.private.
	Home *bool `yaml:"home,omitempty" json:"home,omitempty"`
	// Credentials copies the operator's ~/.codex/auth.json into that
	// directory: an API key as it is, of a ChatGPT login only its access
	// and id tokens (never the refresh token: codex.AuthForRun). Nothing is
	// copied back. Needs home.
	Credentials *bool `yaml:"credentials,omitempty" json:"credentials,omitempty"`
}

// On reports whether an optional switch is set to true.
func On(b *bool) bool { return b != nil && *b }

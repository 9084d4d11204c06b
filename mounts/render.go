package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/policy"
)

// DefaultShmSize caps /dev/shm when the policy does not: bwrap's --dev
// makes an uncapped /dev/shm otherwise.
const DefaultShmSize = 64 << 20

// DefaultHomeSize caps a private home when the policy does not.
const DefaultHomeSize = 256 << 20

// bwrapMaxArgs is how many arguments bubblewrap accepts, its own name
// included (bubblewrap.c, parse_args_recurse: MAX_ARGS).
const bwrapMaxArgs = 9000

// minimalDirs are bound read-only by base: minimal (symlinks are recreated).
var minimalDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// procCovers are what a jailed uid 0 could write in a fresh /proc; a sealed
// profile running as root covers them read-only (bwrap never covers
// /proc/sys: access(W_OK) says EACCES even to root, see docs/nesting.md,
// What was measured).
var procCovers = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}

// Input is everything Render needs.
type Input struct {
	Policy policy.Policy // merged, validated and expanded
	Disk   Disk          // the host's /
	User   User          // the run user
	// OperatorHomes are where credentials are looked for, in order
	// ($SUDO_USER's home, then the invoking user's).
	OperatorHomes []string
	Bwrap         bwrap.Version
	Chdir         string // absolute; the agent starts here
	ExecStage     string // host path of the exec stage binary (execstage.Binary, or agentjail itself)
	// EmptyFile is an empty regular file on the host that every user can
	// read; masks are bound from it (see protect). "": /dev/null.
	EmptyFile string
	// CommonDirFile is a regular file on the host holding ".\n" that
	// every user can read: a missing commondir of a git directory under a
	// writable root is masked with it (git dies on an empty one).
	CommonDirFile string
	// GitFile is a regular file on the host holding "gitdir: " and a
	// directory every jail shows (agentjail's run directory, covered):
	// a missing .git under a writable root is masked with it, which
	// neither git nor the agents misread as a repository.
	GitFile        string
	CredentialsDir string // where copied credentials are placed before launch
	// GitIgnoreFile is where, on the host, the run's Plan.GitIgnore is
	// written before launch (in the run's agent-homes directory); "": none.
	GitIgnoreFile string
	// ClaudeDir is the host directory that holds the run's private Claude
	// Code directory (claude.home), bound at ~/.claude in the jail;
	// ClaudeConfigDir the one the operator's Claude Code configuration is
	// copied into (claude.settings), bound from read-only.
	ClaudeDir, ClaudeConfigDir string
	// ClaudeSessions is the host directory bound at ~/.claude/projects to
	// keep the sessions between runs (claude.dir): that directory's
	// projects, or where agentjail has bound it for the jail; "" for none.
	ClaudeSessions string
	// CodexDir is the host directory that holds the run's private Codex
	// directory (codex.home), bound at ~/.codex in the jail.
	CodexDir string
	// RunDir is agentjail's run directory (masks' empty file and registry,
	// live runs' state and control sockets, every run's agent homes). The
	// jail never sees it: binds take their sources from the host's root,
	// not the jail's, so what this run needs from it still arrives.
	RunDir string
	// IsPlaceholder reports whether an empty file is only the mask
	// placeholder of another (live or killed) run; such paths count as
	// missing. Nil: none are.
	IsPlaceholder func(path string) bool
	// IsBuiltinOrigin reports whether an origin (policy.Origins) is a
	// built-in profile's (policy.Loader.IsBuiltinOrigin): what the
	// operator does not edit. Nil: none is.
	IsBuiltinOrigin func(origin string) bool
	Seccomp         int // number of seccomp filters passed as fds
	// Listen are addresses the exec stage listens on inside the jail and
	// hands back over its control channel (execstage.Args.Listen): the
	// network broker's.
	Listen []string
	// Pty gives the agent a terminal of its own, made by the exec stage
	// (execstage.Args.Pty).
	Pty  bool
	Argv []string
	// ProcCovers lists what keeps the jail from mounting a fresh /proc
	// (ProcCovers of the host's mountinfo); nil when nothing does or when
	// that is unknown. With covers, Render binds the existing /proc if the
	// policy allows it (a degradation), else refuses (ErrProcCovered).
	ProcCovers []string
	// Inputs are the files agentjail read to make this jail (profiles,
	// seccomp files), absolute: kept read-only where they lie in a
	// writable root, so that no run edits what the next one loads.
	Inputs []string
}

// Plan is a rendered jail.
type Plan struct {
	// Args is bwrap's argv after argv[0].
	Args []string
	// FDs names the arguments of Args that are file-descriptor numbers.
	FDs map[int]string
	// Env is not rendered here; see policy.Environment.Apply.

	// Home is the agent's HOME inside the jail.
	Home string
	// Copies are credentials to copy into CredentialsDir (and ClaudeDir)
	// before the launch, owned by the run user.
	Copies []Copy
	// Dirs are directories to create, owned by the run user, before the
	// launch (bind sources that must exist).
	Dirs []Dir
	// Claude is the run's private Claude Code directory; nil without
	// claude.home.
	Claude *ClaudeHome
	// Codex is the run's private Codex directory; nil without codex.home.
	Codex *CodexHome
	// Masks are host paths bwrap creates as mount points to keep missing
	// protected paths from being created (empty files, and empty
	// directories under a tmpfs); they are removed after the run.
	Masks []string
	// GitIgnore are the lines of the file agentjail makes at
	// Input.GitIgnoreFile and binds at git's default excludes file in the
	// private home (~/.config/git/ignore): the masks of missing protected
	// paths, which git would otherwise show as untracked files and an
	// agent's `git add -A` commit; none when nothing is bound.
	GitIgnore []string
	// Protected and Denied list what was re-protected and hidden.
	Protected, Denied []string
	// Warnings are printed on stderr before the launch.
	Warnings []string
	// Degradations are the promises this jail cannot keep on this host
	// and that the policy allowed it to drop; printed on stderr before the
	// launch and kept in the run record.
	Degradations []string
}

// Copy is one credential copied in.
type Copy struct{ Src, Dst string }

// Dir is a directory made on the host for the run. Size, when not 0, caps
// it: it is a tmpfs of that size where agentjail may mount one (as root),
// since it stands for part of the capped private home.
type Dir struct {
	Path string
	Size int64
}

// Render builds the plan of one jail, or returns every problem found at once
// (errors.Join of *policy.FieldError naming the field and its origin).
func Render(in Input) (Plan, error) {
	r := renderer{in: in, p: in.Policy, plan: Plan{FDs: map[int]string{}}}
	r.check()
	if len(r.errs) > 0 {
		return Plan{}, policy.InFileOrder(r.errs)
	}
	roots := WritableRoots(in.Policy)
	r.namespaces()
	r.base()
	r.tmpfs(roots, false)
	r.home()
	for i, p := range in.Policy.Filesystem.Read {
		if exists(in.Disk, p) {
			field := fmt.Sprintf("filesystem.read[%d]", i)
			t, err := resolve(in.Disk, p)
			switch closed := in.User.closedAbove(in.Disk, t); {
			case err != nil || closed == "":
			case r.builtin(in.Policy.Origins.Of(field)):
				// A built-in's list names tools that may be there; one
				// the run user cannot reach is no tool of theirs.
				r.plan.Warnings = append(r.plan.Warnings, fmt.Sprintf("%s: %s is out of the run user %s's reach (%s is closed to that user); nothing is bound",
					in.Policy.Origins.Of(field), policy.Quote(p), in.User.Name, policy.Quote(closed)))
				continue
			default:
				// bwrap, as the run user, would say only "Can't find
				// source path ...: Permission denied".
				r.fail(field, "%s is out of the run user %s's reach (uid %d): %s is closed to that user; bind a path that user can reach, or choose the run user with --user",
					policy.Quote(p), in.User.Name, in.User.UID, policy.Quote(closed))
				continue
			}
			r.mount("--ro-bind-try", p, p)
		} else if o := in.Policy.Origins.Of(fmt.Sprintf("filesystem.read[%d]", i)); o == "--read" {
			// A profile's list names tools that may or may not be
			// installed; a path typed on the command line is meant.
			r.plan.Warnings = append(r.plan.Warnings, fmt.Sprintf("--read %s: no such path; nothing is bound", policy.Quote(p)))
		}
	}
	for _, p := range roots {
		r.mount("--bind", p, p)
	}
	// bwrap mounts in order: a tmpfs inside a writable root goes after
	// the root's bind, which would hide it.
	r.tmpfs(roots, true)
	r.protect(roots)
	r.deny(roots)
	r.hideRunDir()
	r.credentials(roots)
	r.claude(roots)
	r.codex(roots)
	r.network()
	r.tail()
	if n := len(r.plan.Args) + 1; n > bwrapMaxArgs {
		r.errs = append(r.errs, fmt.Errorf("%w: %d, for %d protected paths under the writable roots, where bubblewrap takes %d; %s",
			ErrTooManyArgs, n, len(r.plan.Protected), bwrapMaxArgs, crowdedFix(r.plan.Protected)))
	}
	// Emit only what the detected bwrap understands: an option it lacks
	// would fail the launch with bwrap's "Unknown option", or worse, be
	// taken for the command.
	if err := in.Bwrap.Check(r.plan.Args); err != nil {
		r.errs = append(r.errs, err)
	}
	if len(r.errs) > 0 {
		return Plan{}, policy.InFileOrder(r.errs)
	}
	return r.plan, nil
}

type renderer struct {
	in   Input
	p    policy.Policy
	plan Plan
	errs []error
	// stack lists mount points in order, each noting whether it hides what
	// was below it (a tmpfs) or shows the host's tree (a bind).
	stack []mountPoint
}

type mountPoint struct {
	dest  string
	hides bool
}

func (r *renderer) arg(a ...string) { r.plan.Args = append(r.plan.Args, a...) }

// mount appends a mount flag and its arguments, tracking the mount point.
func (r *renderer) mount(flag string, a ...string) {
	r.arg(flag)
	r.arg(a...)
	dest := a[len(a)-1]
	r.stack = append(r.stack, mountPoint{dest: dest, hides: flag == "--tmpfs" || flag == "--dev"})
}

// hiddenBy returns the tmpfs that hides p inside the jail, or "".
func (r *renderer) hiddenBy(p string) string {
	for i := len(r.stack) - 1; i >= 0; i-- {
		m := r.stack[i]
		if under(p, m.dest) {
			if m.hides && m.dest != p {
				return m.dest
			}
			return ""
		}
	}
	return ""
}

// fd appends a flag whose value is a file descriptor, remembering its name.
func (r *renderer) fd(flag string, n int, name string) {
	r.arg(flag, strconv.Itoa(n))
	r.plan.FDs[len(r.plan.Args)-1] = name
}

// inDenied says where p lies: the denied path d itself, or inside it.
func (r *renderer) inDenied(p, d string) string {
	if p == d {
		return "is the denied path " + policy.Quote(d)
	}
	return "lies inside the denied path " + policy.Quote(d)
}

// denyFix is the fix for a path in filesystem.deny[j]: remove one of the
// two, unless the denial is a built-in profile's, which the operator does
// not edit; then other, what else to do.
func (r *renderer) denyFix(j int, other string) string {
	o := r.p.Origins.Of(fmt.Sprintf("filesystem.deny[%d]", j))
	if r.builtin(o) {
		return fmt.Sprintf("%s: the denial is the built-in profile's (%s)", other, o)
	}
	return "remove one of them"
}

// builtin reports whether origin is a built-in profile's (Input.IsBuiltinOrigin).
func (r *renderer) builtin(origin string) bool {
	return r.in.IsBuiltinOrigin != nil && r.in.IsBuiltinOrigin(origin)
}

func (r *renderer) fail(field, format string, a ...any) {
	r.errs = append(r.errs, policy.ErrorAt(r.p, field, fmt.Sprintf(format, a...)))
}

func (r *renderer) sealed() bool { return r.p.InnerSandbox == policy.InnerSealed }

// bindProc reports whether the jail falls back to the existing /proc.
func (r *renderer) bindProc() bool {
	return len(r.in.ProcCovers) > 0 && r.p.Filesystem.Proc == policy.ProcFreshOrBind
}

// check refuses what bwrap would fail on or what would widen the policy.
func (r *renderer) check() {
	fsys := r.p.Filesystem
	if r.in.User.UID == 0 && !r.sealed() {
		r.fail("user", "the run user is uid 0, allowed only with inner_sandbox: sealed (a jailed root can write host sysctls and cannot build its own sandbox); pass --user with an unprivileged user")
	}
	for i, w := range fsys.Write {
		field := fmt.Sprintf("filesystem.write[%d]", i)
		q := policy.Quote(w)
		if systemDir(w) {
			// A chown -R of it, the fix offered below, would break the
			// host.
			r.fail(field, "writable root %s is a system directory; a writable root is a project's own directory (--write /srv/proj)", q)
			continue
		}
		fi, err := lstat(r.in.Disk, w)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.fail(field, "writable root %s does not exist; create it first (mkdir -p %s) or remove it", q, q)
			continue
		case err != nil:
			r.fail(field, "writable root %s: %v", q, err)
			continue
		}
		if canon, err := resolve(r.in.Disk, w); err == nil && canon != w {
			r.fail(field, "writable root %s passes through a symlink and is really %s; pass the canonical path %[2]s", q, policy.Quote(canon))
			continue
		}
		if !fi.IsDir() {
			// Protected paths, deny and the after-run checks all work
			// on directories; a file is also the one thing an agent
			// could replace with a link for the operator to follow.
			r.fail(field, "writable root %s is not a directory; a writable root is a directory: give the one that holds it (%s), or bind the file read-only with read:", q, policy.Quote(path.Dir(w)))
			continue
		}
		if !r.in.User.canWrite(r.in.Disk, w) {
			if r.in.User.Why == policy.WhyInvoker {
				// agentjail runs as the operator, without root: neither
				// --user nor chown is theirs to use.
				r.fail(field, "writable root %s is not writable by you (%s, uid %d), as whom the agent runs: give a directory of your own, or have its owner let you write it",
					q, r.in.User.Name, r.in.User.UID)
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && r.in.User.Name == "nobody" && (!inSystemTree(w) || under(w, "/var/tmp")) {
				// The owner is root, so the agent runs as nobody
				// (docs/jail.md#the-run-user): --user cannot choose root
				// (a sealed profile's alone), nor should chown give the
				// project to nobody. The fix is a normal user's.
				r.fail(field, "writable root %s is owned by root, so the agent runs as nobody, who cannot write it (agents do not run as root): give it to the user the agent should run as (`chown -R USER: %s`) and pass --user USER, or work in a directory a normal user owns",
					q, policy.ShellQuote(w))
				continue
			}
			if inSystemTree(w) {
				// No chown -R offered: in the system's trees it could
				// break the host.
				r.fail(field, "writable root %s is not writable by the run user %s (uid %d); pass --user with a user who may write it (not root: agents do not run as root), or give a directory of the run user's own",
					q, r.in.User.Name, r.in.User.UID)
			} else {
				r.fail(field, "writable root %s is not writable by the run user %s (uid %d); fix with `chown -R %d:%d %s`, or choose the owner with --user",
					q, r.in.User.Name, r.in.User.UID, r.in.User.UID, r.in.User.GID, q)
			}
		}
		for j, d := range fsys.Deny {
			if under(w, d) {
				r.fail(field, "writable root %s %s; %s", q, r.inDenied(w, d), r.denyFix(j, "choose another directory"))
			}
		}
		if d := r.in.RunDir; d != "" && under(w, d) {
			r.fail(field, "writable root %s lies inside agentjail's run directory %s, which no jail sees; choose another directory", q, d)
		}
	}
	for i, rd := range fsys.Read {
		if rd == "/" || under(rd, "/dev") || under(rd, "/proc") {
			// Bound after them, it would cover the jail's own /dev (where
			// the exec stage is) and /proc.
			r.fail(fmt.Sprintf("filesystem.read[%d]", i), "%s would cover the jail's own /dev and /proc; bind the directories the agent needs instead", policy.Quote(rd))
			continue
		}
		for j, d := range fsys.Deny {
			if under(rd, d) {
				r.fail(fmt.Sprintf("filesystem.read[%d]", i), "%s %s, which stays hidden; %s", policy.Quote(rd), r.inDenied(rd, d), r.denyFix(j, "bind something else"))
			}
		}
	}
	if len(r.in.ProcCovers) > 0 && r.p.Filesystem.Proc != policy.ProcFreshOrBind {
		// Fail closed: bwrap would fail too, with a message that names
		// neither the cause nor the fix.
		r.errs = append(r.errs, fmt.Errorf("%w: mounts cover parts of the host's /proc (%s); run `agentjail doctor` for the fix, or allow `filesystem: {proc: fresh-or-bind}` in a profile",
			ErrProcCovered, strings.Join(r.in.ProcCovers, ", ")))
	}
	if r.in.Chdir != "" {
		if fi, err := r.in.Disk.Lstat(rel(r.in.Chdir)); err != nil || !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			r.errs = append(r.errs, fmt.Errorf("start directory %s does not exist or is not a directory; pass --chdir with an existing directory", policy.Quote(r.in.Chdir)))
		} else if !r.in.User.canEnter(r.in.Disk, r.in.Chdir) {
			// bwrap would say only "Can't chdir to DIR: Permission denied".
			u := r.in.User
			why := ""
			if u.Why != "" {
				why = ", chosen by " + u.Why
			}
			r.errs = append(r.errs, fmt.Errorf("start directory %s: the run user %s (uid %d%s) may not enter it; pass --chdir with a directory that user may enter, or choose the run user with --user",
				policy.Quote(r.in.Chdir), u.Name, u.UID, why))
		}
	}
}

func (r *renderer) namespaces() {
	if !r.bindProc() {
		// A bound /proc describes agentjail's pid namespace, not a new
		// one; bubblewrap (the agent's own included) opens
		// /proc/<child pid>/ns with the pid as its own namespace numbers
		// it, so under a /proc of another pid namespace it fails ("open
		// /proc/3/ns/ns failed") and leaves its cloned child blocked for
		// ever, or reads another process's namespaces. The jail shares the
		// pid namespace that its /proc shows instead.
		r.arg("--unshare-pid")
	}
	r.arg("--unshare-uts", "--unshare-ipc")
	if r.p.NetMode() != policy.NetHost {
		r.arg("--unshare-net")
	}
	if r.sealed() {
		// --disable-userns needs a user namespace of its own.
		r.arg("--unshare-user", "--disable-userns")
		if r.in.User.UID == 0 {
			r.arg("--uid", "0", "--gid", "0", "--cap-drop", "ALL")
		}
	}
	r.arg("--die-with-parent", "--new-session")
}

func (r *renderer) base() {
	if r.p.Filesystem.Base == policy.BaseMinimal {
		for _, dir := range minimalDirs {
			fi, err := lstat(r.in.Disk, dir)
			switch {
			case err != nil:
			case fi.Mode()&fs.ModeSymlink != 0:
				if t, err := r.in.Disk.ReadLink(rel(dir)); err == nil {
					r.arg("--symlink", t, dir)
				}
			default:
				r.mount("--ro-bind", dir, dir)
			}
		}
	} else {
		r.mount("--ro-bind", "/", "/")
	}
	if r.bindProc() {
		// The binding is recursive, so the host's covers stay in place.
		r.mount("--bind", "/proc", "/proc")
		r.plan.Degradations = append(r.plan.Degradations, fmt.Sprintf("no fresh /proc and no pid namespace (filesystem.proc: fresh-or-bind; mounts cover %s): the agent sees agentjail's processes and its own sandbox runs in its weaker mode; see docs/nesting.md",
			strings.Join(r.in.ProcCovers, ", ")))
	} else {
		r.mount("--proc", "/proc")
	}
	r.mount("--dev", "/dev")
	if r.in.ExecStage != "" {
		r.mount("--ro-bind", r.in.ExecStage, execstage.Path)
	}
}

// tmpfs mounts the configured tmpfs mounts, capped, parents first: those
// inside a writable root (inRoots) or the others. After the others it
// makes /dev read-only: bwrap's --dev leaves a writable, uncapped /dev.
func (r *renderer) tmpfs(roots []string, inRoots bool) {
	mounts := r.p.Filesystem.Tmpfs
	if _, ok := mounts["/dev/shm"]; !ok {
		mounts = maps.Clone(mounts)
		if mounts == nil {
			mounts = map[string]policy.Tmpfs{}
		}
		mounts["/dev/shm"] = policy.Tmpfs{Size: DefaultShmSize, Mode: 0o1777}
	}
	for _, mp := range slices.Sorted(maps.Keys(mounts)) {
		// A tmpfs at a writable root itself (--write /tmp) goes first:
		// the root asked for shows the host's directory over it.
		inRoot := underAny(mp, roots) && !slices.Contains(roots, mp)
		if inRoot != inRoots {
			continue
		}
		if !r.mountPoint(mp, roots) {
			continue
		}
		t := mounts[mp]
		mode := t.Mode
		if mode == 0 {
			mode = 0o755
		}
		r.arg("--perms", fmt.Sprintf("%04o", uint32(mode)), "--size", strconv.FormatInt(int64(t.Size), 10))
		r.mount("--tmpfs", mp)
	}
	if !inRoots {
		r.arg("--remount-ro", "/dev")
	}
}

// mountPoint checks that bwrap can mount a tmpfs at mp, which it would
// otherwise find out inside the jail, failing the run with "Can't mkdir
// ...: Read-only file system": mp must be an existing directory where the
// mounts so far show the host (the read-only base, a writable root,
// where a directory bwrap made would be made on the host), and may be
// missing only inside a tmpfs (which bwrap's --dev is too) or the empty
// root of a minimal base.
func (r *renderer) mountPoint(mp string, roots []string) bool {
	field := "filesystem.tmpfs[" + mp + "]"
	q := policy.Quote(mp)
	var over *mountPoint
	for i := len(r.stack) - 1; i >= 0; i-- {
		if under(path.Dir(mp), r.stack[i].dest) {
			over = &r.stack[i]
			break
		}
	}
	if over == nil || over.hides {
		return true
	}
	where := "in the read-only " + over.dest
	if underAny(mp, roots) {
		where = "in the writable root " + over.dest + " without changing the host"
	}
	fi, err := lstat(r.in.Disk, mp)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		r.fail(field, "tmpfs mount point %s does not exist, and bubblewrap cannot make it %s; create it first (mkdir -p %[1]s), or mount the tmpfs inside another tmpfs (/tmp/...)", q, where)
	case err != nil:
		r.fail(field, "tmpfs mount point %s: %v", q, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := resolve(r.in.Disk, mp)
		r.fail(field, "tmpfs mount point %s is a symlink to %s; mount the tmpfs at the directory itself", q, policy.Quote(t))
	case !fi.IsDir():
		r.fail(field, "tmpfs mount point %s is not a directory; a tmpfs is mounted on a directory", q)
	default:
		return true
	}
	return false
}

// home mounts a private home when the policy asks for one: at the run
// user's home when that directory exists, else at /tmp/home/NAME (/tmp being
// the jail's own tmpfs), since bwrap cannot create a mount point in the
// read-only base.
func (r *renderer) home() {
	r.plan.Home = r.in.User.Home
	h := r.p.Filesystem.Home
	if h.Private == nil || !*h.Private {
		return
	}
	size := int64(DefaultHomeSize)
	if h.Size != nil {
		size = int64(*h.Size)
	}
	home := r.in.User.Home
	if fi, err := lstat(r.in.Disk, home); err != nil || !fi.IsDir() || home == "/" {
		if _, ok := r.p.Filesystem.Tmpfs["/tmp"]; !ok {
			r.errs = append(r.errs, fmt.Errorf("%s: filesystem.home.private: the run user's home %q does not exist and /tmp is not a tmpfs to make one in; add filesystem.tmpfs /tmp or give the run user a home", r.p.Origins.Of("filesystem.home"), home))
			return
		}
		home = path.Join("/tmp/home", r.in.User.Name)
	}
	r.plan.Home = home
	r.arg("--perms", "0700", "--size", strconv.FormatInt(size, 10))
	r.mount("--tmpfs", home)
}

func (r *renderer) protect(roots []string) {
	depth := policy.DefaultProtectDepth
	if d := r.p.Filesystem.ProtectDepth; d != nil {
		depth = *d
	}
	homes := slices.Compact(append(slices.Clone(r.in.OperatorHomes), r.in.User.Home))
	patterns := append(append(slices.Clone(r.p.Filesystem.Protect), r.copySources()...), r.inputs(roots)...)
	pr := findProtected(placeholderDisk{r.in.Disk, r.in.IsPlaceholder}, roots, patterns, depth, homes)
	r.errs = append(r.errs, pr.errs...)
	for _, d := range pr.unreadable {
		if !r.in.User.CanWrite(r.in.Disk, d) {
			continue // the agent can make nothing there either
		}
		q := policy.Quote(d)
		r.errs = append(r.errs, fmt.Errorf("%w: %s, under a writable root, cannot be read, so the protected paths below it cannot be found (an earlier run may have left it so); make it readable (chmod u+rx %s), or give narrower writable roots",
			ErrUnreadable, q, policy.ShellQuote(d)))
	}
	r.rootsInProtected(pr)
	// Parents first, before what they hold is made read-only.
	slices.Sort(pr.pins)
	for _, p := range pr.pins {
		r.mount("--bind", p, p)
	}
	for _, p := range pr.existing {
		r.mount("--ro-bind", p, p)
	}
	// A mask shows in the jail as an empty, read-only regular file, not
	// as /dev/null's character device: the agent's own sandbox (Claude
	// Code's sandbox-runtime) protects paths such as .claude/settings.json
	// too, and skips one whose ancestor is a regular file, but binds
	// /dev/null over it when the ancestor is a device, which bwrap cannot
	// do under a non-directory ("Can't mkdir parents ...: Not a directory"),
	// and every sandboxed command then fails.
	empty := r.in.EmptyFile
	if empty == "" {
		empty = "/dev/null"
	}
	// A missing directory that would hold protected paths is an empty
	// tmpfs, the run user's, in which they are masked below: a directory
	// to Claude Code, which takes a .claude that is a file for a broken
	// settings file (ENOTDIR), and one in which Claude Code's own sandbox
	// can make the mount points it needs for the paths it protects there
	// (it cannot in a read-only one, and every sandboxed command would
	// fail). What else is written there is the run's alone: it never
	// reaches the host, and the cap keeps a large write failing rather
	// than vanishing after the run.
	for _, d := range pr.dirs {
		r.arg("--size", strconv.Itoa(dirMaskSize))
		r.mount("--tmpfs", d)
	}
	for _, m := range pr.masks {
		src := empty
		if path.Base(m) == ".git" {
			if r.in.GitFile == "" {
				r.errs = append(r.errs, fmt.Errorf("%s is missing and there is no file to mask it with (Input.GitFile)", m))
				break
			}
			src = r.in.GitFile
		}
		r.mount("--ro-bind", src, m)
	}
	for _, m := range pr.commondirs {
		if r.in.CommonDirFile == "" {
			r.errs = append(r.errs, fmt.Errorf("%s is missing and there is no file to mask it with (Input.CommonDirFile)", m))
			break
		}
		r.mount("--ro-bind", r.in.CommonDirFile, m)
	}
	for _, l := range pr.links {
		target, err := resolve(r.in.Disk, l)
		if err != nil {
			target, _ = r.in.Disk.ReadLink(rel(l))
		}
		// The link and its target may be an agent's (made in an earlier
		// run): quoted, and the commands shell-quoted.
		ql, qt := policy.Quote(l), policy.Quote(target)
		if policy.On(r.p.Filesystem.AcceptProtectedSymlinks) {
			r.plan.Warnings = append(r.plan.Warnings, fmt.Sprintf("protected path %s is a symlink to %s: its target is read-only, but the link itself can be replaced, which the check after the run reports as a violation (filesystem.accept_protected_symlinks)", ql, qt))
			continue
		}
		sl, st := policy.ShellQuote(l), policy.ShellQuote(target)
		fix := fmt.Sprintf("replace the link by what it points to (rm %s && cp -a %s %s)", sl, st, sl)
		if path.Base(l) == "hooks" {
			fix = fmt.Sprintf("remove the link and point git at the directory instead (rm %s && git config core.hooksPath %s), or replace the link by what it points to", sl, st)
		}
		if policy.Printable(l) != l || policy.Printable(target) != target {
			fix = "remove the link, whose name or target holds control characters no command here should repeat (an agent's, perhaps), and check what else is new there"
		}
		r.errs = append(r.errs, fmt.Errorf("%w: %s -> %s: a mount cannot cover a link, which the agent could replace; %s, or set `filesystem: {accept_protected_symlinks: true}` (docs/jail.md)",
			ErrProtectedLink, ql, qt, fix))
	}
	r.plan.Protected = append(append(pr.existing, pr.masks...), pr.commondirs...)
	// On the host, a placeholder is made only where a mount point lies
	// outside those tmpfs: the masks elsewhere, and each tmpfs's own (an
	// empty directory), last.
	for _, m := range pr.masks {
		if !slices.Contains(pr.dirs, path.Dir(m)) {
			r.plan.Masks = append(r.plan.Masks, m)
		}
	}
	r.plan.Masks = append(append(r.plan.Masks, pr.commondirs...), pr.dirs...)
	r.gitIgnore(pr, roots)
}

// gitIgnore binds, at git's default excludes file in the private home, the
// list of the masks git would show in a work tree: a missing protected
// path is an empty read-only file in the jail (a directory for one that
// would hold some), which `git status` lists as untracked and `git add -A`
// commits, and which is gone after the run. A repository's top may be any
// directory above a mask (the agent may `git init` anywhere), so each is
// listed anchored at each of them. Nothing is bound where the home is not
// the jail's own (a writable root or a read-only bind shows the host's
// there), nor where the profile sets no private home.
func (r *renderer) gitIgnore(pr protection, roots []string) {
	h := r.p.Filesystem.Home
	dest := path.Join(r.plan.Home, ".config/git/ignore")
	if r.in.GitIgnoreFile == "" || h.Private == nil || !*h.Private || underAny(dest, roots) || underAny(dest, r.p.Filesystem.Read) {
		return
	}
	var lines []string
	add := func(p, suffix string) {
		if strings.ContainsAny(p, "\n\r") {
			return // no line can name it
		}
		for top := path.Dir(p); ; top = path.Dir(top) {
			rel := strings.TrimPrefix(p, top)
			if top == "/" {
				rel = p
			}
			lines = append(lines, ignoreName(rel)+suffix)
			if top == "/" {
				return
			}
		}
	}
	for _, m := range pr.masks {
		if path.Base(m) != ".git" && !slices.Contains(pr.dirs, path.Dir(m)) {
			add(m, "")
		}
	}
	for _, d := range pr.dirs {
		add(d, "/")
	}
	if len(lines) == 0 {
		return
	}
	slices.Sort(lines)
	r.plan.GitIgnore = append([]string{"# agentjail: the read-only placeholders of missing protected paths; not the project's files"}, slices.Compact(lines)...)
	r.mount("--ro-bind", r.in.GitIgnoreFile, dest)
}

// rootsInProtected refuses a writable root inside what another root's
// protection makes read-only or masks (--write proj --write proj/.git/hooks):
// mounted after the root, the protection would keep it read-only, and the
// agent's writes would fail with nothing said why.
func (r *renderer) rootsInProtected(pr protection) {
	covers := slices.Concat(pr.existing, pr.masks, pr.dirs, pr.commondirs)
	for i, w := range r.p.Filesystem.Write {
		w = path.Clean(w)
		for _, p := range covers {
			if w == p || under(w, p) {
				where := "lies in " + policy.Quote(p) + ", which agentjail protects"
				if w == p {
					where = "is a path agentjail protects"
				}
				// The root whose protection it is.
				if j := slices.IndexFunc(r.p.Filesystem.Write, func(o string) bool { o = path.Clean(o); return o != w && under(p, o) }); j >= 0 {
					where += " in the writable root " + policy.Quote(path.Clean(r.p.Filesystem.Write[j]))
				}
				r.fail(fmt.Sprintf("filesystem.write[%d]", i), "writable root %s %s (filesystem.protect, or the files git reads configuration from or runs): it would stay read-only; drop it, or write somewhere else",
					policy.Quote(w), where)
				break
			}
		}
	}
}

// ignoreName is name as a gitignore line names it, not as a pattern:
// gitignore(5) takes a backslash before a glob's character, and before a
// trailing space.
func ignoreName(name string) string {
	name = ignoreEscapes.Replace(name)
	if strings.HasSuffix(name, " ") {
		name = name[:len(name)-1] + `\ `
	}
	return name
}

var ignoreEscapes = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)

// dirMaskSize caps the tmpfs over a missing directory that would hold
// protected paths (protection.dirs).
const dirMaskSize = 1 << 20

// deny hides each denied path the run user could reach: an empty,
// read-only tmpfs over a directory, /dev/null over anything else.
func (r *renderer) deny(roots []string) {
	private := r.p.Filesystem.Home.Private != nil && *r.p.Filesystem.Home.Private
	for _, d := range r.denyList() {
		fi, err := lstat(r.in.Disk, d)
		if err != nil || !r.in.User.reachable(r.in.Disk, d) {
			continue
		}
		// The private home already hides the host's, unless a writable
		// root or a read-only bind at or above d brings the host's back.
		if private && r.plan.Home == r.in.User.Home && under(d, r.plan.Home) && !underAny(d, roots) && !underAny(d, r.p.Filesystem.Read) {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// Hide what the link points to; the link is read-only in the
			// base unless it lies under a writable root.
			t, err := resolve(r.in.Disk, d)
			if err != nil || !exists(r.in.Disk, t) {
				continue
			}
			if fi, err = lstat(r.in.Disk, t); err != nil {
				continue
			}
			d = t
		}
		if slices.Contains(r.plan.Denied, d) {
			continue
		}
		switch {
		case fi.IsDir() && r.in.RunDir != "" && under(r.in.RunDir, d) && r.in.RunDir != d:
			// Agentjail's run directory below it (a non-root operator's
			// $XDG_RUNTIME_DIR/agentjail, under /run/user) must still be
			// there, empty (hideRunDir): the tmpfs over d holds only its
			// mount point, and may be traversed to it, not listed.
			r.arg("--perms", "0111", "--size", "4096")
			r.mount("--tmpfs", d)
			r.hideDir(r.in.RunDir)
			r.arg("--remount-ro", d)
			r.plan.Denied = append(r.plan.Denied, d)
		case fi.IsDir():
			r.hideDir(d)
		default:
			r.mount("--ro-bind", "/dev/null", d)
			r.plan.Denied = append(r.plan.Denied, d)
		}
	}
}

// hideDir covers a directory with an empty, read-only tmpfs no one may
// enter.
func (r *renderer) hideDir(d string) {
	r.arg("--perms", "0000", "--size", "4096")
	r.mount("--tmpfs", d)
	r.arg("--remount-ro", d)
	r.plan.Denied = append(r.plan.Denied, d)
}

// hideRunDir covers agentjail's run directory with an empty, read-only
// tmpfs: from inside it an agent could read other runs' copied files (a
// non-root operator's runs share one owner), reach their control sockets,
// or, through a writable root above it, rewrite the file every mask is
// bound from. It must be there all the same, empty: the mask over a
// missing .git names it (Input.GitFile), and Codex logs an error for a
// gitdir that does not exist, many times a run. So it is made under a
// tmpfs of the jail's own (a non-root operator's /tmp/agentjail-UID), and
// under a denied directory too (deny).
func (r *renderer) hideRunDir() {
	d := r.in.RunDir
	if d == "" || !exists(r.in.Disk, d) || underAny(d, r.plan.Denied) {
		return
	}
	r.hideDir(d)
}

// credentials makes each ~/path of the operator's appear under the agent's
// home: bound read-only when the run user can read it, otherwise copied into
// CredentialsDir (owned by the run user) and that copy bound read-only, so
// nothing is ever written back. One that is a link in a writable root, or
// passes through one, is left out (plantedLink).
func (r *renderer) credentials(roots []string) {
	for _, c := range r.p.Filesystem.Credentials {
		sub := policy.ExpandPath(c, []string{"/"}, "")[0]
		for _, h := range r.in.OperatorHomes {
			src := path.Join(h, sub)
			if !exists(r.in.Disk, src) {
				continue
			}
			if r.plantedLink(src, roots) != "" {
				break
			}
			dst := path.Join(r.plan.Home, sub)
			if r.in.User.canReadTree(r.in.Disk, src) {
				if src != dst || r.p.Filesystem.Home.Private != nil && *r.p.Filesystem.Home.Private {
					r.mount("--ro-bind", src, dst)
				}
			} else {
				copied := path.Join(r.in.CredentialsDir, sub)
				r.plan.Copies = append(r.plan.Copies, Copy{Src: src, Dst: copied})
				r.mount("--ro-bind", copied, dst)
			}
			break
		}
	}
}

func (r *renderer) tail() {
	if r.sealed() && r.in.User.UID == 0 {
		r.arg("--ro-bind", "/proc/sys", "/proc/sys")
		for _, p := range procCovers[1:] {
			r.arg("--ro-bind-try", p, p)
		}
	}
	if r.p.Filesystem.Base == policy.BaseMinimal {
		r.arg("--remount-ro", "/")
	}
	if r.in.Chdir != "" {
		if t := r.hiddenBy(r.in.Chdir); t != "" {
			r.errs = append(r.errs, fmt.Errorf("start directory %s is not visible in the jail: the tmpfs at %s hides it; pass --chdir with a visible directory, or make it a writable root with --write %s", r.in.Chdir, t, r.in.Chdir))
		}
		r.arg("--chdir", r.in.Chdir)
	}
	r.fd("--json-status-fd", execstage.FDStatus, "status")
	// The sandbox waits after bwrap's setup, before it forks anything of
	// the agent's, until the supervisor holds a verified pidfd on it
	// (supervise.Run).
	r.fd("--block-fd", execstage.FDBlock, "block")
	for i := range r.in.Seccomp {
		r.fd("--add-seccomp-fd", execstage.FDSeccomp+i, "seccomp-"+strconv.Itoa(i))
	}
	r.arg("--")
	if r.in.ExecStage == "" {
		r.arg(r.in.Argv...)
		return
	}
	// The exec stage applies the rlimits to itself before it execs the
	// agent, so every process of the agent's inherits them.
	stage := execstage.Args{Report: -1, Control: -1, Listen: r.in.Listen, Pty: r.in.Pty, Argv: r.in.Argv}
	for _, name := range slices.Sorted(maps.Keys(r.p.Limits.Rlimits)) {
		stage.Rlimits = append(stage.Rlimits, name+"="+rlimitValue(r.p.Limits.Rlimits[name]))
	}
	w := stage.Words()
	r.arg(w[0])
	r.fd(execstage.FlagReport, execstage.FDReport, "exec-report")
	// The control channel only where the stage has something to send.
	if len(stage.Listen) > 0 || stage.Pty {
		r.fd(execstage.FlagControl, execstage.FDControl, "control")
	}
	r.arg(w[1:]...)
}

// rlimitValue is an rlimit as the exec stage reads it: a decimal number
// or "unlimited".
func rlimitValue(v policy.Rlimit) string {
	if v == policy.Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(uint64(v), 10)
}

// WritableRoots returns a policy's writable roots cleaned, sorted (parents
// before children) and without repeats: the order they are bound in.
func WritableRoots(p policy.Policy) []string {
	out := make([]string, 0, len(p.Filesystem.Write))
	for _, w := range p.Filesystem.Write {
		out = append(out, path.Clean(w))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// systemDirs are the host's own directories: none is a writable root,
// nor anything in the kernel's file systems below /proc, /sys and /dev.
var systemDirs = []string{"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/usr", "/var"}

func systemDir(p string) bool {
	return slices.Contains(systemDirs, p) || p != "/" && (under(p, "/proc") || under(p, "/sys") || under(p, "/dev"))
}

// inSystemTree says whether p lies in one of the system's own trees,
// where a directory may be an agent's to write (/etc/nginx for an ops
// agent run as its owner) but is never to be handed over with chown -R.
func inSystemTree(p string) bool {
	return p != "/" && slices.ContainsFunc(systemDirs, func(d string) bool { return d != "/" && under(p, d) })
}

// crowdedFix says what to do about too many protected paths: the deepest
// directory most of them lie in, which may hold files an agent planted by
// the thousand (.env.1, .env.2, …; bare/b1/HEAD, bare/b2/HEAD, …) to make
// every later run refuse; else narrower roots.
func crowdedFix(protected []string) string {
	in := map[string]int{}
	for _, p := range protected {
		for d := path.Dir(p); ; d = path.Dir(d) {
			in[d]++
			if d == "/" || d == "." {
				break
			}
		}
	}
	dir := ""
	for d, n := range in {
		if 2*n >= len(protected) && strings.Count(d, "/") > strings.Count(dir, "/") {
			dir = d
		}
	}
	if dir == "" || len(protected) == 0 {
		return "pass narrower writable roots"
	}
	var some []string
	for _, p := range protected {
		if strings.HasPrefix(p, dir+"/") && len(some) < 3 {
			some = append(some, policy.Quote(strings.TrimPrefix(p, dir+"/")))
		}
	}
	return fmt.Sprintf("%d of them are in %s (%s, …): remove those that should not be there (a run's agent may have made them), or pass narrower writable roots", in[dir], policy.Quote(dir), strings.Join(some, ", "))
}

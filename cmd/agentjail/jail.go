package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/profiles"
	"github.com/agentjail/agentjail/supervise"
)

// jail is a command line turned into everything a launch needs.
type jail struct {
	runID   string
	profile string
	policy  policy.Policy // merged, validated, expanded
	user    mounts.User   // Why: how the run-user rule chose it
	bwrap   bwrap.Info
	plan    mounts.Plan
	seccomp []*os.File // compiled filters, for --add-seccomp-fd
	// exeCopy holds the copy of agentjail bound as the exec stage, nil when
	// none was made (supervise.StageExecutable).
	exeCopy *os.File
	env     []string
	argv    []string
}

func loader() policy.Loader {
	return policy.Loader{Builtins: profiles.FS, ReadFile: os.ReadFile, Precompiled: profiles.Precompiled}
}

// prepare loads the profile, lays the flags over it, picks the run user,
// expands and validates, detects bwrap and renders the plan. Every error it
// returns is agentjail's own (exit 125) and names what to fix.
func prepare(cmd *cli.Command, argv []string) (*jail, error) {
	return prepareWith(cmd, argv, jailOptions{})
}

// jailOptions is what doctor varies in the jail a run would get.
type jailOptions struct {
	dir string // the start directory, instead of --chdir or the current one
	// userDir, when set, is the directory whose owner the run-user rule
	// looks at instead of the start directory's (doctor probes from / but
	// must probe the user a run from here would get).
	userDir string
	// freshProc tries a fresh /proc whatever the host's mount table says,
	// to hear the kernel's own verdict.
	freshProc bool
	// noClaudeHome leaves out the private Claude Code directory, which the
	// probes do not need: doctor then needs no writable state directory.
	noClaudeHome bool
	// runID replaces the fresh run id: render shows a placeholder where a
	// run's own id would be (its staging directory), so that its output
	// depends only on the command line and the host.
	runID string
}

func prepareWith(cmd *cli.Command, argv []string, opt jailOptions) (*jail, error) {
	if len(argv) == 0 {
		return nil, usageError{"no command to run: write `agentjail " + cmd.Name + " [flags] -- CMD [ARG...]`"}
	}
	j := &jail{profile: cmd.String("profile"), argv: argv, runID: opt.runID}
	if j.runID == "" {
		j.runID = newRunID()
	}
	base, err := loader().Load(j.profile)
	if err != nil {
		return nil, err
	}
	over, err := overlay(cmd)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	p := policy.Merge(base, over)
	if err := policy.Validate(p); err != nil {
		return nil, err
	}

	dir := cmd.String("chdir")
	if opt.dir != "" {
		dir = opt.dir
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("cannot read the current directory: %w; pass --chdir", err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	ownerDir := dir
	if opt.userDir != "" {
		ownerDir = opt.userDir
	}
	inv := policy.Invocation{
		UID: os.Getuid(), FlagUser: cmd.String("user"),
		SudoUID: os.Getenv("SUDO_UID"), SudoGID: os.Getenv("SUDO_GID"),
		DirOwner: -1, Dir: ownerDir,
	}
	if fi, err := os.Stat(ownerDir); err == nil {
		inv.DirOwner = int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	choice := policy.PickRunUser(p, inv)
	if j.user, err = lookupUser(choice); err != nil {
		return nil, err
	}
	if inv.UID != 0 && j.user.UID != inv.UID {
		return nil, fmt.Errorf("cannot run as %s (uid %d, chosen by %s): agentjail was started by uid %d without root; run it as root, or as that user",
			j.user.Name, j.user.UID, choice.Why, inv.UID)
	}

	// The operator's homes: $SUDO_USER's, then the invoking user's ($HOME
	// and the user database's, which differ under `sudo -E` and in
	// containers). With the run user's, they are every home whose secrets
	// are at stake.
	var operator []string
	if su := os.Getenv("SUDO_USER"); su != "" && inv.UID == 0 {
		operator = append(operator, homeOf(su))
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		operator = append(operator, filepath.Clean(h))
	}
	operator = append(operator, homeOf(strconv.Itoa(inv.UID)))
	homes := append(slices.Clone(operator), j.user.Home)
	j.policy = policy.Expand(p, policy.Vars{SecretHomes: compact(homes), RunHome: j.user.Home, PWD: dir})

	if j.bwrap, err = bwrap.Detect(cacheDir()); err != nil {
		return nil, err
	}
	if err := checkRunDir(true); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err == nil && inv.UID == 0 && j.user.UID != 0 {
		exe, j.exeCopy, err = supervise.StageExecutable(exe, filepath.Join(runDir(), "bin"))
	}
	if err != nil {
		return nil, fmt.Errorf("cannot provide the agentjail binary to the jail's exec stage: %w", err)
	}
	if j.seccomp, err = seccompFiles(j.policy); err != nil {
		j.release()
		return nil, err
	}
	var covers []string
	if !opt.freshProc {
		covers = hostProcCovers(j.bwrap, j.policy)
	}
	claudeDir := filepath.Join(stageDir(j.runID), "claude")
	if opt.noClaudeHome {
		claudeDir = ""
	}
	j.plan, err = mounts.Render(mounts.Input{
		Policy:        j.policy,
		Disk:          os.DirFS("/").(mounts.Disk),
		User:          j.user,
		OperatorHomes: compact(operator),
		Bwrap:         j.bwrap.Version,
		Chdir:         dir,
		ExecStage:     exe,
		EmptyFile:     emptyFile(),
		StagingDir:    filepath.Join(stageDir(j.runID), "credentials"),
		ClaudeDir:     claudeDir,
		RunDir:        runDir(),
		IsPlaceholder: func(p string) bool { return supervise.IsMask(maskDir(), p) },
		Seccomp:       len(j.seccomp),
		Argv:          argv,
		ProcCovers:    covers,
	})
	if err != nil {
		j.release()
		return nil, err
	}
	defaults := map[string]string{"HOME": j.plan.Home, "USER": j.user.Name, "LOGNAME": j.user.Name}
	if j.plan.Claude != nil {
		defaults["CLAUDE_CONFIG_DIR"] = j.plan.Claude.Jail
	}
	j.env = j.policy.Environment.Apply(os.Environ(), defaults, map[string]string{"AGENTJAIL_RUN": j.runID})
	return j, nil
}

// release closes the seccomp filters and lets go of the exec stage's copy:
// call it once no jail of j will start any more.
func (j *jail) release() {
	closeAll(j.seccomp)
	if j.exeCopy != nil {
		j.exeCopy.Close()
	}
}

// hostProcCovers lists what keeps bwrap from mounting a fresh /proc here
// (mounts.ProcCovers). Only a bwrap that makes a user namespace is refused:
// a setuid bwrap without --unshare-user mounts procfs as real root. An
// unreadable mount table yields nil: the fresh /proc is then tried, and
// bwrap fails if it cannot — a degradation is taken only on evidence.
func hostProcCovers(b bwrap.Info, p policy.Policy) []string {
	if b.Setuid && p.InnerSandbox != policy.InnerSealed {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	table, err := mounts.ParseMountinfo(f)
	if err != nil {
		return nil
	}
	return mounts.ProcCovers(table)
}

func compact(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "" && s != "/" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// newRunID is the run's id and the marker value of AGENTJAIL_RUN.
func newRunID() string { return strings.ToLower(rand.Text()) }

// runDir holds per-run state: /run/agentjail as root, else
// $XDG_RUNTIME_DIR/agentjail.
func runDir() string {
	if os.Getuid() != 0 {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			return filepath.Join(x, "agentjail")
		}
		return filepath.Join(os.TempDir(), "agentjail-"+strconv.Itoa(os.Getuid()))
	}
	return "/run/agentjail"
}

// runSubdirs are the directories agentjail makes in the run directory
// (the run's own staging directory, named by its fresh id, is made later).
var runSubdirs = []string{"bin", "masks", "runs"}

// checkRunDir refuses a run directory that is not the caller's alone, and
// creates it (0700) when create is set and it is missing. Without
// $XDG_RUNTIME_DIR a non-root run uses /tmp/agentjail-UID, which any user
// can make first: its owner could then swap the masks' empty file, plant
// mask registry entries and control sockets, or read and redirect staged
// credentials. So the directory, each one agentjail makes in it and the
// empty file must be owned by the caller (root's /run/agentjail by root)
// and writable by no one else, checked with lstat (a symlink is refused,
// never followed). Once that holds, nobody else can create or replace
// anything inside, and /tmp's sticky bit keeps the directory itself from
// being renamed away.
func checkRunDir(create bool) error {
	dir := runDir()
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err = os.Mkdir(dir, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = os.Lstat(dir)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil
	case err != nil:
		return fmt.Errorf("agentjail's run directory %s: %w; %s", dir, err, runDirFix(dir))
	}
	if err := ownedAlone(dir, fi, true); err != nil {
		return err
	}
	for _, name := range append(slices.Clone(runSubdirs), "empty") {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("agentjail's run directory: %s: %w; %s", p, err, runDirFix(dir))
		}
		if err := ownedAlone(p, fi, name != "empty"); err != nil {
			return err
		}
	}
	return nil
}

// ownedAlone checks that p (lstat'ed as fi) is a directory (else a regular
// file), owned by the caller and writable by no one else.
func ownedAlone(p string, fi fs.FileInfo, dir bool) error {
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	var problem string
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		problem = "is a symlink"
	case dir && !fi.IsDir():
		problem = "is not a directory"
	case !dir && !fi.Mode().IsRegular():
		problem = "is not a regular file"
	case uid != os.Geteuid():
		problem = fmt.Sprintf("is owned by %s, not by you (uid %d)", userName(uid), os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		problem = fmt.Sprintf("is writable by others (mode %04o)", fi.Mode().Perm())
	default:
		return nil
	}
	return fmt.Errorf("%w: %s %s: whoever made it could swap the files agentjail binds into the jail, its control sockets and staged credentials; %s",
		errRunDir, p, problem, runDirFix(runDir()))
}

// runDirFix says how to get a run directory of one's own.
func runDirFix(dir string) string {
	if os.Geteuid() == 0 {
		return fmt.Sprintf("remove it (rm -rf %s) and run agentjail again: it recreates it owned by root, mode 0711", dir)
	}
	return fmt.Sprintf("remove it (its owner or root: rm -rf %s), or set XDG_RUNTIME_DIR to a directory only you can write (such as /run/user/%d)", dir, os.Geteuid())
}

// userName is "uid N (name)", or "uid N" without a user database entry.
func userName(uid int) string {
	if a, err := users.lookup(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, a.Name)
	}
	return fmt.Sprintf("uid %d", uid)
}

var errRunDir = errors.New("agentjail's run directory is not yours alone")

// stageDir holds what one run copies in: credentials, the private Claude
// Code directory. It is removed when the run ends.
func stageDir(runID string) string { return filepath.Join(runDir(), runID) }

// emptyFile is the empty file masks are bound from.
func emptyFile() string { return filepath.Join(runDir(), "empty") }

// maskDir is the registry of mask placeholders shared by concurrent runs.
func maskDir() string { return filepath.Join(runDir(), "masks") }

// cacheDir holds the detected bwrap version.
func cacheDir() string {
	if os.Getuid() == 0 {
		return "/var/cache/agentjail"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentjail")
	}
	return filepath.Join(os.TempDir(), "agentjail-cache-"+strconv.Itoa(os.Getuid()))
}

// usageError is a command-line mistake: exit 125, message on stderr.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

var errUsage = errors.New("usage")

func (e usageError) Is(target error) bool { return target == errUsage }

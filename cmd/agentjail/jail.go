package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"
	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/claude"
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
	// loginFile is what the run gets of the operator's Claude Code login,
	// nil for none; credentials reports it for the record (login).
	loginFile   []byte
	credentials *claude.Credentials
	// configFile is what the run gets of the operator's ~/.claude.json,
	// nil for none (config).
	configFile []byte
}

// loader loads built-in profiles and profile files (readInput; a signal
// on interrupt ends a wait for a pipe, nil: SIGINT and SIGTERM do).
func loader(interrupt <-chan os.Signal) policy.Loader {
	read := func(name string) ([]byte, error) { return readInput(name, interrupt) }
	return policy.Loader{Builtins: profiles.FS, ReadFile: read, Precompiled: profiles.Precompiled}
}

// prepare loads the profile, lays the flags over it, picks the run user,
// expands and validates, detects bwrap and renders the plan. Every error it
// returns is agentjail's own (exit 125) and names what to fix. A signal on
// interrupt ends it while it loads the profile, or waits for an input file
// that is a pipe.
func prepare(cmd *cli.Command, argv []string, interrupt <-chan os.Signal) (*jail, error) {
	return prepareWith(cmd, argv, jailOptions{interrupt: interrupt})
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
	// interrupt delivers the SIGINT and SIGTERM the caller catches: one
	// ends the loading of the profile, and a wait for an input file that
	// is a pipe (readInput).
	interrupt <-chan os.Signal
}

func prepareWith(cmd *cli.Command, argv []string, opt jailOptions) (*jail, error) {
	if len(argv) == 0 {
		return nil, usageError{"no command to run: write `agentjail " + cmd.Name + " [flags] -- CMD [ARG...]`"}
	}
	j := &jail{profile: cmd.String("profile"), argv: argv, runID: opt.runID}
	if j.runID == "" {
		j.runID = newRunID()
	}
	// The files read as input, to be kept read-only where they lie in a
	// writable root (mounts.Input.Inputs).
	var inputs []string
	l := loader(opt.interrupt)
	read := l.ReadFile
	l.ReadFile = func(name string) ([]byte, error) {
		if abs, err := filepath.Abs(name); err == nil {
			inputs = append(inputs, abs)
		}
		return read(name)
	}
	base, err := l.Load(j.profile)
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
	select {
	case sig := <-opt.interrupt: // while the profile was parsed
		return nil, fmt.Errorf("interrupted by %s while loading the profile; nothing ran", unix.SignalName(sig.(syscall.Signal)))
	default:
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
	if err := supervise.CheckRunDir(true); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err == nil && inv.UID == 0 && j.user.UID != 0 {
		exe, j.exeCopy, err = supervise.StageExecutable(exe, filepath.Join(supervise.RunDir(), "bin"))
	}
	if err != nil {
		return nil, fmt.Errorf("cannot provide the agentjail binary to the jail's exec stage: %w", err)
	}
	if j.seccomp, err = seccompFiles(j.policy, opt.interrupt); err != nil {
		j.release()
		return nil, err
	}
	var covers []string
	if !opt.freshProc {
		covers = hostProcCovers(j.bwrap, j.policy)
	}
	for _, f := range j.policy.Seccomp.Files {
		if abs, err := filepath.Abs(f); err == nil {
			inputs = append(inputs, abs)
		}
	}
	claudeDir := filepath.Join(stageDir(j.runID), "claude")
	if opt.noClaudeHome {
		claudeDir = ""
	}
	j.plan, err = mounts.Render(mounts.Input{
		Policy:        j.policy,
		Disk:          newHostDisk(),
		User:          j.user,
		OperatorHomes: compact(operator),
		Bwrap:         j.bwrap.Version,
		Chdir:         dir,
		ExecStage:     exe,
		EmptyFile:     emptyFile(),
		CommonDirFile: commonDirFile(),
		StagingDir:    filepath.Join(stageDir(j.runID), "credentials"),
		ClaudeDir:     claudeDir,
		RunDir:        supervise.RunDir(),
		IsPlaceholder: func(p string) bool { return supervise.IsMask(supervise.MaskDir(), p) },
		Seccomp:       len(j.seccomp),
		Argv:          argv,
		ProcCovers:    covers,
		Inputs:        inputs,
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

// stageDir holds what one run copies in: credentials, the private Claude
// Code directory. It is removed when the run ends.
func stageDir(runID string) string { return filepath.Join(supervise.RunDir(), runID) }

// emptyFile is the empty file masks are bound from.
func emptyFile() string { return filepath.Join(supervise.RunDir(), "empty") }

// commonDirFile is the file masks over a missing commondir are bound from.
func commonDirFile() string { return filepath.Join(supervise.RunDir(), "commondir") }

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

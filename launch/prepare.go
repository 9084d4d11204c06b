package launch

import (
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/profiles"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
	"github.com/agentjail/agentjail/seccomp"
)

// Jail is a request turned into everything a launch needs.
type Jail struct {
	RunID   string
	Profile string
	Policy  policy.Policy // merged, validated, expanded
	User    mounts.User   // Why: how the run-user rule chose it
	Bwrap   bwrap.Info
	Plan    mounts.Plan
	Seccomp []*os.File // compiled filters, for --add-seccomp-fd
	Env     []string   // the jail's environment, bwrap's own
	Argv    []string
	// exeCopy holds the copy of the exec stage bound into the jail, nil
	// when none was made (hostfs.PublicExecutable).
	exeCopy *os.File
	// masks holds the plan's mask placeholders from the look at the
	// registry the plan was rendered in until the session takes them
	// (open), nil after.
	masks *runstate.Masks
	// warnings are what Prepare found that the run goes on without, for
	// stderr and the record (beside the plan's).
	warnings []string
	// files maps a filtered copy's destination to what the run gets of
	// the operator's file (filtered): a part of a login or a
	// configuration; nil or missing for nothing.
	files map[string][]byte
	// credentials and codexCredentials report the operator's logins for
	// the record (login, codexLogin).
	credentials      *record.ClaudeLogin
	codexCredentials *record.Login
	// net is a proxy jail's network (network.go), nil in other modes.
	net *netPlan
	// secrets are the copied logins' values, redacted from the record as
	// the environment's are.
	secrets []string
}

// Loader loads built-in profiles and profile files (hostfs.ReadInput; a
// signal on interrupt ends a wait for a pipe, nil: SIGINT and SIGTERM do).
func Loader(interrupt <-chan os.Signal) policy.Loader {
	read := func(name string) ([]byte, error) { return hostfs.ReadInput(name, policy.MaxFileSize, interrupt) }
	return policy.Loader{Builtins: profiles.FS, ReadFile: read, Precompiled: profiles.Precompiled}
}

// Prepare loads the profile, lays the request over it, picks the run user,
// expands and validates, detects bwrap and renders the plan. Every error
// it returns is agentjail's own (exit 125) and names what to fix. A signal
// on opt.Interrupt ends it while it loads the profile, or waits for an
// input file that is a pipe. Release the Jail when done.
func Prepare(req Request, opt Options) (*Jail, error) {
	if len(req.Argv) == 0 {
		return nil, UsageError("no command to run: write `agentjail run [flags] -- CMD [ARG...]`")
	}
	if req.Profile == "" {
		req.Profile = "tier1"
	}
	j := &Jail{Profile: req.Profile, Argv: req.Argv, RunID: opt.RunID}
	if j.RunID == "" {
		j.RunID = newRunID()
	}
	// The files read as input, to be kept read-only where they lie in a
	// writable root (mounts.Input.Inputs).
	var inputs []string
	l := Loader(opt.Interrupt)
	read := l.ReadFile
	l.ReadFile = func(name string) ([]byte, error) {
		if abs, err := filepath.Abs(name); err == nil {
			inputs = append(inputs, abs)
		}
		return read(name)
	}
	base, err := l.Load(j.Profile)
	if err != nil {
		return nil, err
	}
	over, err := overlay(req)
	if err != nil {
		return nil, UsageError(err.Error())
	}
	if req.Net == policy.NetHost && base.NetMode() != policy.NetHost {
		// The operator means it; said so that a pasted command line does
		// not open the network unseen.
		j.warnings = append(j.warnings, fmt.Sprintf("--net host: the %s profile's %s network is replaced by the host's, unfiltered: the agent can reach any host, the host's loopback services and cloud metadata, and can read its API key", j.Profile, base.NetMode()))
	}
	p := interactiveLimits(policy.Merge(base, over), req)
	p.Limits.Rlimits = callerRlimits(p.Limits.Rlimits, req.CallerRlimits, currentLimit)
	if err := policy.Validate(p); err != nil {
		return nil, err
	}
	select {
	case sig := <-opt.Interrupt: // while the profile was parsed
		return nil, fmt.Errorf("interrupted by %s while loading the profile; nothing ran", unix.SignalName(sig.(syscall.Signal)))
	default:
	}

	dir := req.Chdir
	if opt.Dir != "" {
		dir = opt.Dir
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
	if opt.UserDir != "" {
		ownerDir = opt.UserDir
	}
	inv := policy.Invocation{
		UID: os.Getuid(), FlagUser: req.User,
		SudoUID: os.Getenv("SUDO_UID"), SudoGID: os.Getenv("SUDO_GID"),
		DirOwner: -1, Dir: ownerDir,
	}
	switch fi, err := os.Stat(ownerDir); {
	case err == nil && fi.IsDir():
		inv.DirOwner = int(fi.Sys().(*syscall.Stat_t).Uid)
	case opt.UserDir == "" && (err == nil || errors.Is(err, fs.ErrNotExist)):
		// Said alone: the run user the rule would pick without its
		// owner (nobody) is no mistake of the operator's.
		return nil, fmt.Errorf("start directory %s does not exist or is not a directory; pass --chdir with an existing directory", policy.Quote(dir))
	}
	choice := policy.PickRunUser(p, inv)
	if j.User, err = lookupUser(choice); err != nil {
		return nil, err
	}
	if inv.UID != 0 && j.User.UID != inv.UID {
		return nil, fmt.Errorf("cannot run as %s (uid %d, chosen by %s): agentjail was started by uid %d without root; run it as root, or as that user",
			j.User.Name, j.User.UID, choice.Why, inv.UID)
	}
	if inv.UID != 0 {
		j.User.Why = policy.WhyInvoker // --user naming oneself included: no other is to be had
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
	homes := append(slices.Clone(operator), j.User.Home)
	j.Policy = policy.Expand(p, policy.Vars{SecretHomes: compact(homes), RunHome: j.User.Home, PWD: dir})

	if j.Bwrap, err = bwrap.Detect(CacheDir()); err != nil {
		return nil, err
	}
	if err := runstate.CheckRunDir(true); err != nil {
		return nil, err
	}
	exe, why, err := stageBinary()
	if why != "" {
		j.warnings = append(j.warnings, why)
	}
	if err == nil && inv.UID == 0 && j.User.UID != 0 {
		exe, j.exeCopy, err = hostfs.PublicExecutable(exe, filepath.Join(runstate.RunDir(), "bin"))
	}
	if err != nil {
		return nil, fmt.Errorf("cannot provide the jail's exec stage: %w", err)
	}
	if j.Seccomp, err = seccompFiles(j.Policy, opt.Interrupt); err != nil {
		j.Release()
		return nil, err
	}
	var covers []string
	if !opt.FreshProc {
		covers = hostProcCovers(j.Bwrap, j.Policy)
	}
	for _, f := range j.Policy.Seccomp.Files {
		if abs, err := filepath.Abs(f); err == nil {
			inputs = append(inputs, abs)
		}
	}
	apiKey, err := readAPIKey(req.APIKeyFile, opt.Interrupt)
	if err != nil {
		j.Release()
		return nil, err
	}
	var listen []string
	if j.Policy.NetMode() == policy.NetProxy {
		listen = brokerListen
	}
	runHomes := AgentHomesDir(j.RunID)
	agents := map[string]string{}
	if !opt.NoAgentHomes {
		for _, name := range []string{"claude", "claude-config", "codex"} {
			agents[name] = filepath.Join(runHomes, name)
		}
	}
	sessions, err := j.claudeSessions(opt.NoAgentHomes)
	if err != nil {
		j.Release()
		return nil, err
	}
	// The plan is rendered and its masks held in one look at the
	// registry: another run's placeholder it takes for missing stays there
	// until this run holds it too (runstate.Masks).
	view, err := runstate.ViewMasks(runstate.MaskDir())
	if err != nil {
		view.Close()
		j.Release()
		return nil, err
	}
	j.Plan, err = mounts.Render(mounts.Input{
		Policy:          j.Policy,
		Disk:            newHostDisk(),
		User:            j.User,
		OperatorHomes:   compact(operator),
		Bwrap:           j.Bwrap.Version,
		Chdir:           dir,
		ExecStage:       exe,
		EmptyFile:       EmptyFile(),
		CommonDirFile:   CommonDirFile(),
		GitFile:         GitFile(),
		CredentialsDir:  filepath.Join(AgentHomesDir(j.RunID), "credentials"),
		GitIgnoreFile:   GitIgnoreFile(j.RunID),
		ClaudeDir:       agents["claude"],
		ClaudeConfigDir: agents["claude-config"],
		ClaudeSessions:  sessions,
		CodexDir:        agents["codex"],
		RunDir:          runstate.RunDir(),
		IsPlaceholder:   view.IsMask,
		IsBuiltinOrigin: l.IsBuiltinOrigin,
		Seccomp:         len(j.Seccomp),
		Pty:             req.TTY == TTYOn,
		Listen:          listen,
		Argv:            j.Argv,
		ProcCovers:      covers,
		Inputs:          inputs,
	})
	if err == nil && !opt.PlanOnly {
		j.masks, err = view.Hold(j.Plan.Masks)
	}
	view.Close()
	if err != nil {
		j.Release()
		return nil, err
	}
	defaults := map[string]string{"HOME": j.Plan.Home, "USER": j.User.Name, "LOGNAME": j.User.Name}
	if j.Plan.Claude != nil {
		defaults["CLAUDE_CONFIG_DIR"] = j.Plan.Claude.Jail
	}
	if j.Plan.Codex != nil {
		defaults["CODEX_HOME"] = j.Plan.Codex.Jail
	}
	j.Env = j.Policy.Environment.Apply(os.Environ(), defaults, map[string]string{"AGENTJAIL_RUN": j.RunID})
	j.Env = withoutRefreshTokens(j.Env)
	switch {
	case j.Policy.NetMode() == policy.NetProxy:
		if j.Env, j.net, err = proxyEnv(j.Env, j.Policy, apiKey); err != nil {
			j.Release()
			return nil, err
		}
		if d := j.net.dropped; len(d) > 0 {
			j.warnings = append(j.warnings, fmt.Sprintf("%s not given to the jail: the broker holds only the API routes' credentials; to pass them, run with --net host", strings.Join(d, ", ")))
		}
	case j.Policy.NetMode() == policy.NetNone:
		j.Env = withoutAPICredentials(j.Env) // nothing there could use them
	case apiKey != "":
		j.Env = setEnv(j.Env, "ANTHROPIC_API_KEY", apiKey)
	}
	return j, nil
}

// Release closes the seccomp filters and lets go of the exec stage's copy:
// call it once no jail of j will start any more.
func (j *Jail) Release() {
	j.masks.Release()
	j.masks = nil
	closeAll(j.Seccomp)
	if j.exeCopy != nil {
		j.exeCopy.Close()
	}
}

// hostProcCovers lists what keeps bwrap from mounting a fresh /proc here
// (procs.ProcCovers). Only a bwrap that makes a user namespace is refused:
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
	table, err := procs.ParseMountinfo(f)
	if err != nil {
		return nil
	}
	return procs.ProcCovers(table)
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

// newRunID is the run's id and the marker value of AGENTJAIL_RUN: 128
// bits from the runtime's generator (ChaCha8, seeded by the kernel),
// which costs a launch nothing; crypto/rand's first use does (its DRBG
// starts up).
func newRunID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// GitIgnoreFile is where a run's mounts.Plan.GitIgnore is written.
func GitIgnoreFile(runID string) string { return filepath.Join(AgentHomesDir(runID), "git", "ignore") }

// AgentHomesDir holds what one run copies in: credentials, the agents' private
// directories. It is removed when the run ends.
func AgentHomesDir(runID string) string { return filepath.Join(runstate.RunDir(), runID) }

// EmptyFile is the empty file masks are bound from.
func EmptyFile() string { return filepath.Join(runstate.RunDir(), "empty") }

// CommonDirFile is the file masks over a missing commondir are bound from.
func CommonDirFile() string { return filepath.Join(runstate.RunDir(), "commondir") }

// GitFile is the file masks over a missing .git are bound from: it points
// git at the run directory (hostfs.GitFile).
func GitFile() string { return filepath.Join(runstate.RunDir(), "gitfile") }

// CacheDir holds the detected bwrap version.
func CacheDir() string {
	if os.Getuid() == 0 {
		return "/var/cache/agentjail"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentjail")
	}
	return filepath.Join(os.TempDir(), "agentjail-cache-"+strconv.Itoa(os.Getuid()))
}

// seccompFiles compiles the policy's filters into sealed memfds for bwrap's
// --add-seccomp-fd, in order. A signal on interrupt ends a wait for a
// seccomp file that is a pipe.
func seccompFiles(p policy.Policy, interrupt <-chan os.Signal) ([]*os.File, error) {
	read := func(name string) ([]byte, error) { return hostfs.ReadInput(name, policy.MaxFileSize, interrupt) }
	filters, err := seccomp.Filters(p, read, seccomp.CurrentHost())
	if err != nil || len(filters) == 0 {
		return nil, err
	}
	// Compiled filters are kept in the run directory, which no jail sees
	// and runstate.CheckRunDir has found to be agentjail's user's alone.
	cache, _ := seccomp.OpenCache(filepath.Join(runstate.RunDir(), "seccomp"), mounts.WritableRoots(p))
	defer cache.Close()
	var files []*os.File
	for i, f := range filters {
		bpf, err := cache.Compile(f)
		var file *os.File
		if err == nil {
			file, err = seccomp.File(strconv.Itoa(i), bpf)
		}
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Warnings are what the run goes on without and the operator should know:
// the plan's, and Prepare's own.
func (j *Jail) Warnings() []string { return append(slices.Clone(j.Plan.Warnings), j.warnings...) }

// stageBinary is the exec stage bwrap runs inside the jail: the small
// static agentjail-exec installed beside agentjail, or, where there is
// none (agentjail built alone, `go install`), agentjail itself. One that is
// there but refused (a symlink, writable by others, another owner's: not
// what agentjail's owner installed) is said, as why: the jail still gets
// agentjail itself as its stage, which reports the same exactly.
func stageBinary() (exe, why string, err error) {
	f, err := hostfs.Sibling(execstage.Binary)
	if err == nil {
		defer f.Close()
		return f.Name(), "", nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		why = fmt.Sprintf("not using %s: %v; the exec stage is agentjail itself", execstage.Binary, err)
	}
	exe, err = os.Executable()
	return exe, why, err
}

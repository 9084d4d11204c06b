package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/supervise"
	"github.com/agentjail/agentjail/term"
)

// forwarded are the signals agentjail catches: the first four end the run
// (after the grace), SIGUSR1/2 only reach the agent. SIGPIPE is caught so
// that a write to a closed stdout returns EPIPE instead of killing
// agentjail before it has ended the jail and written the record. SIGURG is
// never caught: the Go runtime preempts goroutines with it.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE}

func (e appEnv) runAction(ctx context.Context, cmd *cli.Command) error {
	// Caught from the start: a signal during setup still ends the run
	// with a record (the sandbox is then never released).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	// The terminal on stdin, as found: put back once the jail is gone,
	// on every path out of here.
	tty := term.Save(e.stdin)
	defer tty.Restore()

	argv := commandArgs(cmd, e.rawAfter(cmd.Name))
	rec := supervise.Record{StartedAt: supervise.Time(time.Now()), Profile: cmd.String("profile"), Argv: argv}
	// Until the policy names the writable roots, no link at all is
	// followed on the way to the record.
	out := &recordFile{path: cmd.String("record"), walker: hostfs.Strict}
	defer out.close()
	// failed ends a run that never started: a record when asked for, and
	// the error for run to print (exit 125).
	failed := func(err error) error { return writeSetupFailed(rec, out, err) }
	// A signal while the profile is loaded (parsed, or read from a pipe,
	// as a seccomp file may be too) ends the run before it starts (125).
	loading := make(chan os.Signal, 1)
	signal.Notify(loading, syscall.SIGINT, syscall.SIGTERM)
	j, err := prepare(cmd, argv, loading) // checks the run directory too
	signal.Stop(loading)
	if err != nil {
		return failed(err)
	}
	defer j.release()
	rec.RunID = j.runID
	rec.User = &supervise.User{UID: j.user.UID, GID: j.user.GID, Name: j.user.Name}
	rec.BwrapVersion = j.bwrap.Version.String()
	for _, w := range j.plan.Warnings {
		fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", w)
	}
	// Every degradation is printed once and recorded: the plan's now, the
	// staging's when taken, the supervisor's (cgroup, rlimits, live) at
	// the end.
	for _, d := range j.plan.Degradations {
		rec.Degradations = append(rec.Degradations, degraded(e.stderr, supervise.Note{What: "jail", Detail: d})...)
	}
	// The outputs are opened now, before the agent runs, and held: see
	// outputs.go.
	out.walker = hostfs.Walker{Roots: mounts.WritableRoots(j.policy)}
	if err := out.open(); err != nil {
		out.path = "" // it could not be written either
		return failed(err)
	}
	// The log is written with no buffer of agentjail's own: every byte is
	// in the file (the kernel's page cache) once read, on every exit path,
	// even SIGKILL. It is not fsynced: that would cost a disk flush per run.
	log, err := openLog(out.walker, cmd.String("log"))
	if err != nil {
		return failed(err)
	}
	warning, err := j.login(time.Now())
	if err != nil {
		return failed(err)
	}
	for _, warning := range []string{warning, j.config()} {
		if warning != "" {
			fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", warning)
			rec.Warnings = append(rec.Warnings, warning)
		}
	}
	if log != nil {
		defer log.Close()
	}
	results, err := openResults(out.walker, cmd.String("results"))
	if err != nil {
		return failed(err)
	}
	defer results.Close()
	// What runs killed with SIGKILL left, without waiting for an init;
	// once the command line is known good, so that a mistake gets its one
	// message alone.
	supervise.SweepDeadRuns(func(format string, args ...any) { fmt.Fprintf(e.stderr, "agentjail: "+format+"\n", args...) })
	if err := reaper.Begin(); err != nil {
		return failed(err)
	}
	staged, err := j.stage()
	if err != nil {
		return failed(err)
	}
	defer staged.Remove()
	if staged != nil {
		rec.Degradations = append(rec.Degradations, degraded(e.stderr, staged.Degradations...)...)
	}

	spec := j.baseSpec(e.stdin, e.stdout, e.stderr)
	spec.Signals, spec.Record, spec.Secrets = sigs, rec, secretValues(j.env)
	if log != nil {
		spec.Log = log
	}
	// claude's json output is parsed as it passes, into the record.
	var parser *claude.Parser
	if format := claude.Command(argv); format != "" {
		parser = claude.NewParser(format)
		if format == claude.FormatJSON || format == claude.FormatStreamJSON {
			spec.StdoutTap = parser
		}
	}
	masks, err := supervise.HoldMasks(supervise.MaskDir(), j.plan.Masks)
	if err != nil {
		return failed(err)
	}
	live := supervise.NewLive(supervise.LiveDir(), supervise.State{
		RunID: j.runID, Profile: j.profile, StartedAt: rec.StartedAt, User: rec.User,
		StopWaitMS: (spec.Grace + supervise.KillWait).Milliseconds(),
		Stage:      staged.Path(),
	})
	spec.Live = live

	since := supervise.RunClock()
	before := j.protectedSnapshot()
	rec, runErr := supervise.Run(spec)
	if _, err := tty.Restore(); err != nil {
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("cannot restore the terminal's modes: %v; run `stty sane`", err))
	}
	// From here on agentjail speaks after the agent, on a line of its own
	// and with the terminal's attributes reset; not at all where the
	// reader stopped reading (a paused terminal blocks every write to it):
	// the record has the messages.
	e.stderr = &newlineFirst{w: term.ResetFirst(e.stderr), pending: rec.StderrMidLine()}
	if rec.Abandoned(0) || rec.Abandoned(1) {
		e.stderr = io.Discard
	}
	degraded(e.stderr, rec.Degradations[len(spec.Record.Degradations):]...)
	if merr := masks.Release(); merr != nil {
		printError(e.stderr, merr)
	}
	if runErr != nil {
		printError(e.stderr, runErr)
	}
	if msg := supervise.LimitMessage(rec); msg != "" {
		fmt.Fprintf(e.stderr, "agentjail: %s\n", msg)
	}
	// What the read-only binds could not prevent is found now that
	// nothing of the jail runs: protected paths that appeared or changed,
	// set-id bits and device nodes made under the writable roots.
	// The two walks are independent; each is about as costly as find(1)
	// over the roots.
	after := make(chan mounts.Snapshot, 1)
	go func() { after <- j.protectedSnapshot() }()
	notes, serr := supervise.StripSetID(mounts.WritableRoots(j.policy), since)
	rec.Violate(supervise.Quarantine(before, <-after, j.plan.Protected, j.walker(), j.runID)...)
	rec.Violate(notes...)
	if serr != nil {
		rec.Warnings = append(rec.Warnings, serr.Error())
		printError(e.stderr, serr)
	}
	for _, v := range rec.Violations {
		fmt.Fprintf(e.stderr, "agentjail: violation: %s\n", v.Detail)
	}
	claudeAfter(j, staged, parser, results, &rec, spec.Secrets)
	*e.code = rec.ExitCode
	if out.path != "" {
		// A record asked for and missing must not pass for a run that
		// went well: agentjail's own failure, in one line.
		if err := out.write(&rec); err != nil {
			fmt.Fprintf(e.stderr, "agentjail: %v; the run ended with exit %d (%s), but agentjail exits %d without its record\n", err, rec.ExitCode, rec.Reason, exitSetup)
			*e.code = exitSetup
		}
	}
	live.Close(&rec)
	return nil
}

// newlineFirst writes a newline before its first write when pending: the
// agent's stderr, which agentjail's own messages follow, ended mid-line.
type newlineFirst struct {
	w       io.Writer
	pending bool
}

func (n *newlineFirst) Write(p []byte) (int, error) {
	if n.pending && len(p) > 0 {
		n.pending = false
		if _, err := n.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	return n.w.Write(p)
}

// degraded prints each degradation taken and returns them.
func degraded(w io.Writer, notes ...supervise.Note) []supervise.Note {
	for _, n := range notes {
		fmt.Fprintf(w, "agentjail: degraded: %s: %s\n", n.What, n.Detail)
	}
	return notes
}

// writeSetupFailed completes rec as a run that never started, failed with
// err, and writes it to out when a record was asked for; it returns err,
// joined with the write's error.
func writeSetupFailed(rec supervise.Record, out *recordFile, err error) error {
	if out.path == "" {
		return err
	}
	if rec.RunID == "" {
		rec.RunID = newRunID()
	}
	rec.Reason, rec.ExitCode, rec.Error = supervise.ReasonSetupFailed, supervise.ExitSetup, err.Error()
	rec.Finish(time.Now())
	if werr := out.write(&rec); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// usageRecord writes the setup_failed record of a `run` whose command line
// urfave/cli could not parse (`--timeout soon`): it reports that before
// runAction, yet a record is promised whenever --record was given. raw is
// the command line after `run`; cmd knows which flags take a value.
func usageRecord(cmd *cli.Command, raw []string, err error) error {
	path, rec := "", supervise.Record{StartedAt: supervise.Time(time.Now()), Profile: "tier1"}
	for i := 0; i < len(raw); i++ {
		a := raw[i]
		if a == "--" {
			rec.Argv = raw[i+1:]
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			rec.Argv = raw[i:]
			break
		}
		name, val, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !inline {
			// An unknown flag (the mistake itself, maybe) is taken for
			// one without a value, as Go's flag package does.
			if !takesValue(cmd, name) || i+1 == len(raw) {
				continue
			}
			i++
			val = raw[i]
		}
		switch name {
		case "record":
			path = val
		case "profile":
			rec.Profile = val
		}
	}
	out := &recordFile{path: path, walker: hostfs.Strict} // the writable roots are not known
	defer out.close()
	return writeSetupFailed(rec, out, err)
}

// takesValue reports whether cmd has a flag called name that takes a value.
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			_, isBool := f.(*cli.BoolFlag)
			return !isBool
		}
	}
	return false
}

// baseSpec is what every launch of the jail shares: bwrap's argv and
// environment, the seccomp filters, the run id and a cgroup, the profile's
// limits, and the run user's credentials when agentjail is root.
func (j *jail) baseSpec(stdin io.Reader, stdout, stderr io.Writer) supervise.Spec {
	spec := supervise.Spec{
		Bwrap: j.bwrap.Path, Args: j.plan.Args, Env: j.env, Seccomp: j.seccomp,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, RunID: j.runID, Cgroup: true,
		SharedPIDs: !slices.Contains(j.plan.Args, "--unshare-pid"),
	}
	ram, _ := supervise.HostMemory("/proc")
	limitsSpec(&spec, j.policy.Limits, ram)
	if syscall.Getuid() == 0 && j.user.UID != 0 {
		spec.Cred = &syscall.Credential{Uid: uint32(j.user.UID), Gid: uint32(j.user.GID), Groups: uint32s(j.user.Groups)}
	}
	return spec
}

// limitsSpec copies the policy's limits into the supervisor's spec; a
// memory cap given as a percentage is taken of ram bytes.
func limitsSpec(spec *supervise.Spec, l policy.Limits, ram int64) {
	dur := func(d *policy.Duration) time.Duration {
		if d == nil {
			return 0
		}
		return time.Duration(*d)
	}
	spec.Wall, spec.Idle, spec.Grace = dur(l.Wall), dur(l.Idle), dur(l.Grace)
	if l.Output.Head != nil {
		spec.Head = int(*l.Output.Head)
	}
	if l.Output.Tail != nil {
		spec.Tail = int(*l.Output.Tail)
	}
	spec.Rlimits = map[string]uint64{}
	for k, v := range l.Rlimits {
		spec.Rlimits[k] = uint64(v)
	}
	if l.Pids != nil {
		spec.PidsMax = int64(*l.Pids)
	}
	if l.Memory != nil {
		spec.MemoryMax = l.Memory.Of(ram)
	}
	if l.Swap != nil {
		spec.SwapMax = int64(*l.Swap)
	}
}

// secretValues are the jail environment's values the record must not
// show: every value but those of variables known to hold none.
func secretValues(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "LC_"):
		case strings.Contains(" PATH HOME USER LOGNAME LANG LANGUAGE TERM COLORTERM NO_COLOR TZ SHELL TMPDIR PWD CLAUDE_CONFIG_DIR "+supervise.MarkerVar+" ", " "+k+" "):
		default:
			out = append(out, v)
		}
	}
	return out
}

// protectedSnapshot records the protected paths under the writable roots
// (mask placeholders, agentjail's own, do not count).
func (j *jail) protectedSnapshot() mounts.Snapshot {
	return mounts.TakeSnapshot(newHostDisk(), j.policy, func(p string) bool { return supervise.IsMask(supervise.MaskDir(), p) })
}

func uint32s(in []int) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}

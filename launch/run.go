package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/codex"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
	"github.com/agentjail/agentjail/runstate/live"
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

// Run runs req end to end and returns agentjail's exit code: it prepares
// the jail, opens the operator's outputs, makes what the jail binds from
// the host, starts and supervises it, checks the writable roots once
// nothing of it runs, and writes the record (on every path, a setup
// failure included). What it has to say goes to out.Stderr, one line each
// (PrintError); the jail's own output passes through out.
func Run(req Request, out IO) int {
	code, err := run(req, out)
	if err != nil {
		PrintError(out.Stderr, err)
		return record.ExitSetup
	}
	return code
}

// IO is where a run's standard streams come from and go to, and what a
// caller that is not the run's own process (the launcher's worker) needs
// to hear of them.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Ready, when set, is called once the run catches the signals it acts
	// on: a signal raised on this process before then would be lost.
	Ready func()
	// Stalled, when set, is called when the run gave up on a write to
	// Stdout or Stderr that is still blocked (their reader stopped): it
	// goes on in the background, and this process must not put another
	// file where they are.
	Stalled func()
	// Job is the process whose job the run is, at the terminal on Stdin:
	// the jail reads that terminal only while its process group is the
	// terminal's foreground (jailStdin). 0: this process.
	Job int
}

// PrintError writes each of err's lines (joined errors) as a message of
// agentjail's own.
func PrintError(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "agentjail: %s\n", policy.Printable(line))
	}
}

// profileName is the profile a request runs on.
func profileName(req Request) string {
	if req.Profile == "" {
		return "tier1"
	}
	return req.Profile
}

func run(req Request, stdio IO) (int, error) {
	// Caught from the start: a signal during setup still ends the run
	// with a record (the sandbox is then never released).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if stdio.Ready != nil {
		stdio.Ready()
	}
	// The terminal on stdin, as found: put back once the jail is gone,
	// on every path out of here.
	tty := term.Save(stdio.Stdin)
	defer tty.Restore()
	req.Typed = tty != nil
	if req.TTY = resolveTTY(req.TTY, stdio); req.TTY == TTYOn {
		signal.Notify(sigs, syscall.SIGWINCH) // the operator's terminal's size, for the agent's
	}

	rec := record.Record{StartedAt: record.Time(time.Now()), Profile: profileName(req), Argv: req.Argv}
	// Until the policy names the writable roots, no link at all is
	// followed on the way to the record.
	out := &recordFile{path: req.Record, walker: hostfs.Strict}
	defer out.close()
	// failed ends a run that never started: a record when asked for, and
	// the error for run to print (exit 125).
	failed := func(err error) (int, error) { return record.ExitSetup, writeSetupFailed(rec, out, err) }
	// A signal while the profile is loaded (parsed, or read from a pipe,
	// as a seccomp file may be too) ends the run before it starts (125).
	loading := make(chan os.Signal, 1)
	signal.Notify(loading, syscall.SIGINT, syscall.SIGTERM)
	j, err := Prepare(req, Options{Interrupt: loading}) // checks the run directory too
	signal.Stop(loading)
	if err != nil {
		return failed(err)
	}
	defer j.Release()
	rec.RunID = j.RunID
	rec.User = &record.User{UID: j.User.UID, GID: j.User.GID, Name: j.User.Name}
	rec.BwrapVersion = j.Bwrap.Version.String()
	// notices is where warnings and degradations are said: nowhere with
	// --quiet (the record has them all).
	notices := stdio.Stderr
	if req.Quiet {
		notices = io.Discard
	}
	for _, w := range j.Warnings() {
		fmt.Fprintf(notices, "agentjail: warning: %s\n", policy.Printable(w))
		rec.Warnings = append(rec.Warnings, w)
	}
	// Every degradation is recorded, and printed once when it weakens what
	// the operator asked for (j.degraded): the plan's now, the homes'
	// and the supervisor's (cgroup, rlimits, live) at the end.
	for _, d := range j.Plan.Degradations {
		rec.Degradations = append(rec.Degradations, j.degraded(notices, record.Note{What: "jail", Detail: d})...)
	}
	// The outputs are opened now, before the agent runs, and held: see
	// outputs.go.
	out.walker = hostfs.Walker{Roots: mounts.WritableRoots(j.Policy)}
	if err := out.open(); err != nil {
		out.path = "" // it could not be written either
		return failed(err)
	}
	// The log is written with no buffer of agentjail's own: every byte is
	// in the file (the kernel's page cache) once read, on every exit path,
	// even SIGKILL. It is not fsynced: that would cost a disk flush per run.
	log, err := openLog(out.walker, req.Log)
	if err != nil {
		return failed(err)
	}
	now := time.Now()
	warning, err := j.login(now)
	if err != nil {
		return failed(err)
	}
	codexWarning, err := j.codexLogin(now)
	if err != nil {
		return failed(err)
	}
	// In a proxy jail the logins go to the broker, not into the jail (in
	// one with no network, login and codexLogin leave them out).
	j.moveLogin()
	j.moveCodexLogin()
	for _, warning := range []string{warning, j.config(), j.settings(), codexWarning} {
		if warning != "" {
			fmt.Fprintf(notices, "agentjail: warning: %s\n", policy.Printable(warning))
			rec.Warnings = append(rec.Warnings, warning)
		}
	}
	if log != nil {
		defer log.Close()
	}
	results, err := openResults(out.walker, req.Results)
	if err != nil {
		return failed(err)
	}
	defer results.Close()
	// What runs killed with SIGKILL left, without waiting for an init;
	// once the command line is known good, so that a mistake gets its one
	// message alone.
	runstate.SweepDeadRuns(func(format string, args ...any) { fmt.Fprintf(notices, "agentjail: "+format+"\n", args...) })
	sess, err := j.open()
	if err != nil {
		return failed(err)
	}
	defer sess.remove()

	termIO, stdout, stderr := openTerminal(req, stdio, tty)
	stdin := stdio.Stdin
	closeStdin := func() {}
	if termIO.pty == nil {
		if stdin, closeStdin, err = jailStdin(stdin, stdio.Job); err != nil {
			return failed(err)
		}
		defer closeStdin()
	}
	spec := j.baseSpec(stdin, stdout, stderr)
	spec.Signals, spec.Record, spec.Secrets = sigs, rec, append(secretValues(j.Env), j.secrets...)
	// The broker says what it refused while the agent runs: at a raw
	// terminal (the agent's own pty) on a line of its own.
	say := func(l string) { fmt.Fprintf(notices, "agentjail: %s\n", policy.Printable(l)) }
	if termIO.pty != nil && tty != nil {
		say = func(l string) { fmt.Fprintf(notices, "\r\n%sagentjail: %s\r\n", term.Reset, policy.Printable(l)) }
	}
	nr := j.startNetwork(&spec, say)
	if j.net != nil {
		spec.Hidden = j.net.secrets()
	}
	if termIO.pty != nil {
		spec.Tty, spec.Warn = termIO.pty, termIO.warn(stdio.Stderr)
		spec.Control = chainControl(spec.Control, termIO.control)
	}
	if log != nil {
		spec.Log = log
	}
	// An agent's structured output is parsed as it passes, into the record.
	var parser *claude.Parser
	var codexParser *codex.Parser
	if format := claude.Command(j.Argv); format != "" {
		parser = claude.NewParser(format)
		if format == claude.FormatJSON || format == claude.FormatStreamJSON {
			spec.StdoutTap = parser
		}
	}
	if format := codex.Command(j.Argv); format != "" {
		codexParser = codex.NewParser(format)
		if format == codex.FormatJSON {
			spec.StdoutTap = codexParser
		}
	}
	live := live.New(runstate.LiveDir(), runstate.State{
		RunID: j.RunID, Profile: j.Profile, StartedAt: rec.StartedAt, User: rec.User,
		StopWaitMS: (spec.Grace + supervise.KillWait).Milliseconds(),
		AgentHomes: AgentHomesDir(j.RunID),
	})
	spec.Live, spec.OnStarter = live, sess.onStarter

	// What the writable roots hold before the agent runs: taken while bwrap
	// sets the jail up, before the sandbox is released (spec.Hold).
	since := hostfs.RunClock()
	var before mounts.Snapshot
	snapped := make(chan struct{})
	go func() {
		before = j.protectedSnapshot(registered) // no look: a long walk holds up no other run
		close(snapped)
	}()
	spec.Hold = snapped
	if err := termIO.begin(sigs); err != nil {
		<-snapped
		return failed(err)
	}
	outcome, runErr := supervise.Run(spec)
	// Nothing of the jail reads any more: what is typed from now on is
	// the shell's.
	closeStdin()
	<-snapped
	rec = outcome.Record
	j.network(nr, &rec)
	if homes := sess.homes; homes != nil {
		rec.Degradations = append(rec.Degradations, homes.Degradations...)
	}
	termIO.end(&rec, outcome.Abandoned)
	// From here on agentjail speaks after the agent, on a line of its own
	// and with the terminal's attributes reset; not at all where the
	// reader stopped reading (a paused terminal blocks every write to it):
	// the record has the messages.
	ownStderr := apart(stdio.Stdout, stdio.Stderr)
	stdio.Stderr = &newlineFirst{w: term.ResetFirst(stdio.Stderr), pending: outcome.StderrMidLine || termIO.midLine(rec)}
	if outcome.Abandoned[0] || outcome.Abandoned[1] {
		// Silent where the reader stopped: stderr, or the file stdout is
		// too (2>&1, one terminal). A stderr of its own still hears the
		// violations and the ending.
		if outcome.Abandoned[1] || !ownStderr {
			stdio.Stderr = io.Discard
		}
		if stdio.Stalled != nil {
			stdio.Stalled()
		}
	}
	if notices != io.Discard {
		notices = stdio.Stderr
	}
	j.degraded(notices, rec.Degradations[len(spec.Record.Degradations):]...)
	if merr := sess.endJail(); merr != nil {
		rec.Warnings = append(rec.Warnings, merr.Error())
		PrintError(stdio.Stderr, merr)
	}
	if runErr != nil {
		PrintError(stdio.Stderr, runErr)
	}
	// What the read-only binds could not prevent is found now that
	// nothing of the jail runs (checkAfter), for as long as the agent made
	// it to take; an ending signal or `agentjail stop` cuts it short.
	checked, checking, cut := make(chan []record.Note, 1), make(chan struct{}), make(chan struct{})
	go func() { checked <- j.checkAfter(before, since, stdio.Stderr, cut) }()
	select {
	case notes := <-checked:
		close(checking)
		rec.Violate(notes...)
	case by := <-cutShort(sigs, live.Stops(), checking):
		close(cut) // nothing more is stripped or moved aside, unsaid
		rec.Violate(record.Note{What: record.ViolationUnchecked, Detail: fmt.Sprintf("the checks after the run were cut short by %s; check the writable roots before git runs there", by)})
	}
	for i, v := range rec.Violations {
		if i == record.MaxPrinted {
			more := len(rec.Violations) - i + rec.ViolationsDropped
			where := "--record lists the first " + strconv.Itoa(record.MaxViolations)
			if out.path != "" {
				where = "the record lists the first " + strconv.Itoa(record.MaxViolations) + " and counts them all"
			}
			fmt.Fprintf(stdio.Stderr, "agentjail: violation: … and %d more (%s)\n", more, where)
			break
		}
		fmt.Fprintf(stdio.Stderr, "agentjail: violation: %s\n", policy.Printable(v.Detail))
	}
	claudeAfter(j, sess, parser, results, &rec, spec.Secrets, spec.Hidden)
	agentAfter(j, codexParser, &rec, spec.Secrets, spec.Hidden)
	// The run's ending, when agentjail caused it, in one line after
	// everything else it says, with where the details are.
	code, ending := rec.ExitCode, rec.Ending()
	if out.path != "" {
		// A record asked for and missing must not pass for a run that
		// went well: agentjail's own failure, in one line, which is the
		// ending line. A violation keeps its code: the alert wins.
		if err := out.write(&rec); err != nil {
			if rec.Reason != record.ReasonViolation {
				code = record.ExitSetup
			}
			fmt.Fprintf(stdio.Stderr, "agentjail: %v; the run ended with exit %d (%s), but agentjail exits %d without its record\n", err, rec.ExitCode, rec.Reason, code)
			ending = ""
		} else if ending != "" {
			ending += "; the record: " + policy.Quote(out.path)
		}
	}
	if ending != "" {
		fmt.Fprintf(stdio.Stderr, "agentjail: %s\n", ending)
	}
	live.Close(&rec)
	return code, nil
}

// checkAfter looks at the writable roots after the run for what the
// read-only binds could not prevent: protected paths that appeared or
// changed (against before, taken at launch), set-id bits and device nodes
// made since the run started, new git directories (moved aside). The two
// walks are independent; each is about as costly as find(1) over the
// roots. Other live runs' mask placeholders are born since too: in one
// look at their registry, none goes until what is not one is moved aside.
// Once stop is closed, they strip and move nothing more.
func (j *Jail) checkAfter(before mounts.Snapshot, since unix.Timespec, stderr io.Writer, stop <-chan struct{}) []record.Note {
	// The walks take no look at the registry: they last as long as the
	// agent made them to, and every other run's removal of its
	// placeholders would wait on them (placeholderDisk tells another
	// run's placeholders apart without one).
	after := make(chan mounts.Snapshot, 1)
	go func() { after <- j.protectedSnapshot(registered) }()
	scan, serr := hostfs.ScanAfterRun(mounts.WritableRoots(j.Policy), since, stop)
	snap := <-after
	// What is moved aside is judged in one look, short, that no removal
	// interrupts; a .git the walk saw that is gone now was another run's
	// placeholder, removed since.
	view, verr := runstate.ViewMasks(runstate.MaskDir())
	if verr != nil {
		PrintError(stderr, verr)
	}
	defer view.Close()
	w := j.walker()
	placeholder := func(p string) bool { return !present(w, p) || view.IsMask(p) && placeholderShaped(w, p) }
	born := slices.DeleteFunc(scan.Born, placeholder)
	// An older .git that changed during the run where the search before
	// it did not see one (node_modules, what looks like a git directory's
	// objects: a directory renamed to .git keeps its birth time) is the
	// agent's as much as a new one.
	var changed []string
	for _, p := range scan.Changed {
		if _, seen := before[p]; !seen && !placeholder(p) {
			changed = append(changed, p)
		}
	}
	// A directory made a git directory by a new HEAD, where the search
	// before the run saw nothing of one (HEAD and refs, without config or
	// hooks, is one to git all the same; planted by the hundred, each
	// costs every later run its masks).
	var heads []string
	isGitDir := gitDirOn(w)
	known := knownBefore(before, j.Plan.Protected)
	for _, h := range scan.Heads {
		if dir := path.Dir(h); path.Base(dir) != ".git" && !known.Has(dir) && !known.HasBelow(dir) && !placeholder(h) && isGitDir(dir) {
			heads = append(heads, dir)
		}
	}
	notes := quarantine(before, snap, j.Plan.Protected, gitFound{born: born, changed: changed, heads: heads}, w, j.RunID, stop)
	notes = append(notes, scan.Notes...)
	if serr != nil {
		// What the walk could not reach was not checked: no clean run.
		notes = append(notes, record.Note{What: record.ViolationUnchecked, Detail: clipLine(serr.Error(), 400) + "; what lies there was not checked for set-id bits, device nodes and new git directories: look at it, and make it readable (or shallower) for the next run"})
	}
	return notes
}

// registered is runstate.Registered in the mask registry.
func registered(p string) bool { return runstate.Registered(runstate.MaskDir(), p) }

// cutShort delivers what cuts the checks after a run short: the name of
// an ending signal agentjail receives, or "agentjail stop"; until done.
func cutShort(sigs <-chan os.Signal, stops, done <-chan struct{}) <-chan string {
	by := make(chan string, 1)
	go func() {
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if s, ok := sig.(syscall.Signal); ok && slices.Contains([]syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}, s) {
					by <- procs.SignalName(s)
					return
				}
			case <-stops:
				by <- "agentjail stop"
				return
			}
		}
	}()
	return by
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

// degraded prints the degradations that weaken a value the operator set,
// and returns them all, for the record. A value is the operator's when a
// flag or a profile file of theirs set it; a built-in profile's default
// the host cannot give (nofile 65536 under a lower inherited hard limit,
// capped agent homes without root) is recorded only, as is what
// nobody asked for by name (a cgroup of the run's own, its listing in
// `agentjail ps`). See docs/supervision.md, Degradations.
func (j *Jail) degraded(w io.Writer, notes ...record.Note) []record.Note {
	builtin := Loader(nil).IsBuiltinOrigin
	for _, n := range notes {
		field := weakens(n.What)
		if origin, ok := j.Policy.Origins[field]; ok && field != "" && !builtin(origin) {
			fmt.Fprintf(w, "agentjail: degraded: %s: %s (%s, %s)\n", n.What, policy.Printable(n.Detail), field, origin)
		}
	}
	return notes
}

// weakens names the policy field whose promise a degradation (its What)
// weakens; "" for none.
func weakens(what string) string {
	if r, ok := strings.CutPrefix(what, "rlimit."); ok {
		return "limits.rlimits[" + r + "]"
	}
	return map[string]string{
		"jail":          "filesystem.proc",
		"staging.size":  "filesystem.home.size", // the homes' tmpfs (hostfs.MakeAgentHomes)
		"cgroup.pids":   "limits.pids",
		"cgroup.memory": "limits.memory",
		"cgroup.swap":   "limits.swap",
	}[what]
}

// SetupFailed writes the setup_failed record of a request that never
// reached Run (its command line did not parse) when it asks for one, and
// returns err as writeSetupFailed does.
func SetupFailed(req Request, err error) error {
	out := &recordFile{path: req.Record, walker: hostfs.Strict}
	defer out.close()
	return writeSetupFailed(record.Record{StartedAt: record.Time(time.Now()), Profile: profileName(req), Argv: req.Argv}, out, err)
}

// writeSetupFailed completes rec as a run that never started, failed with
// err, and writes it to out when a record was asked for. It returns err:
// joined with the write's error when the write failed, else naming the
// record it was written to (recordedError), as every ending agentjail
// causes does.
func writeSetupFailed(rec record.Record, out *recordFile, err error) error {
	if out.path == "" {
		return err
	}
	if rec.RunID == "" {
		rec.RunID = newRunID()
	}
	rec.Reason, rec.ExitCode, rec.Error = record.ReasonSetupFailed, record.ExitSetup, err.Error()
	rec.Finish(time.Now())
	if werr := out.write(&rec); werr != nil {
		return errors.Join(err, werr)
	}
	return recordedError{err, out.path}
}

// recordedError is a setup failure whose record was written: its message
// (the last line of it, for a profile's several mistakes) ends with where
// the record is.
type recordedError struct {
	err  error
	path string
}

func (e recordedError) Error() string {
	return e.err.Error() + "; the record: " + policy.Quote(e.path)
}

func (e recordedError) Unwrap() error { return e.err }

// baseSpec is what every launch of the jail shares: bwrap's argv and
// environment, the seccomp filters, the run id and a cgroup, the profile's
// limits, and the run user's credentials when agentjail is root.
func (j *Jail) baseSpec(stdin io.Reader, stdout, stderr io.Writer) supervise.Spec {
	spec := supervise.Spec{
		Bwrap: j.Bwrap.Path, Args: j.Plan.Args, Env: j.Env, Seccomp: j.Seccomp,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, RunID: j.RunID, Cgroup: true,
		SharedPIDs: !slices.Contains(j.Plan.Args, "--unshare-pid"),
	}
	ram, _ := procs.HostMemory("/proc")
	limitsSpec(&spec, j.Policy.Limits, ram)
	if syscall.Getuid() == 0 && j.User.UID != 0 {
		spec.Cred = &syscall.Credential{Uid: uint32(j.User.UID), Gid: uint32(j.User.GID), Groups: uint32s(j.User.Groups)}
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
		case strings.Contains(" PATH HOME USER LOGNAME LANG LANGUAGE TERM COLORTERM NO_COLOR TZ SHELL TMPDIR PWD CLAUDE_CONFIG_DIR "+procs.MarkerVar+" ", " "+k+" "):
		default:
			out = append(out, v)
		}
	}
	return out
}

// protectedSnapshot records the protected paths under the writable roots
// (mask placeholders, agentjail's own, do not count: isMask, of a look at
// their registry that lasts the snapshot).
func (j *Jail) protectedSnapshot(isMask func(string) bool) mounts.Snapshot {
	d := newHostDisk()
	s := mounts.TakeSnapshot(d, j.Policy, isMask)
	for p, e := range s {
		// A directory the search could not read is the agent's doing
		// only where the run user could write it (not another user's
		// 0700 data directory, which the agent cannot enter either).
		switch {
		case !e.Unreadable || j.User.CanWrite(d, p):
		case e == mounts.Entry{Unreadable: true}:
			delete(s, p)
		default:
			e.Unreadable = false
			s[p] = e
		}
	}
	return s
}

func uint32s(in []int) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}

// clipLine cuts s to about max bytes by its middle, where a path of
// thousands of levels would be: its start and its end (the error) stay.
func clipLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max/2], "") + " … " + strings.ToValidUTF8(s[len(s)-max/2:], "")
}

// Package initcmd is `agentjail init` once its command line is parsed: one
// implementation, run by two binaries.
//
// agentjail parses init's flags (their environment twins, their usage
// errors) and then hands over, by exec, to agentjail-init: a small static
// binary installed next to it (make build, the image, the release). PID 1
// stays PID 1 and keeps its descriptors, and what stays resident for a
// container's whole life is agentjail-init — the reaper, the signal
// forwarding and the dead-run sweep — instead of all of agentjail, with
// its CLI, seccomp (cgo, libc) and the rest (BenchmarkInitIdleRSS and
// docs/benchmarks.md have the figures). agentjail built alone (go
// install) finds no agentjail-init and runs Run itself.
package initcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
)

// Name is agentjail-init's file name, next to agentjail.
const Name = "agentjail-init"

// Options are init's flags, as `agentjail init --help` documents them.
type Options struct {
	Grace      time.Duration // SIGTERM to SIGKILL for what the command leaves
	SweepEvery time.Duration // dead-run sweeps: at start and this often; 0: never
	ChildOnly  bool          // signals to the command alone, not its group
	Verbose    bool          // log every signal, orphan and straggler
	// Ignored are the signals ignored when agentjail started (bit n-1 for
	// signal n; internal/sigstart): kept ignored for the command.
	Ignored uint64
}

// Args is the command line agentjail-init takes for o and the command
// argv: every flag spelled out, so that agentjail-init reads no
// environment of its own, then "--" and argv.
func (o Options) Args(argv []string) []string {
	args := []string{
		"--grace=" + o.Grace.String(),
		"--sweep-every=" + o.SweepEvery.String(),
		fmt.Sprintf("--child-only=%t", o.ChildOnly),
		fmt.Sprintf("--verbose=%t", o.Verbose),
		fmt.Sprintf("--ignored=%#x", o.Ignored),
		"--",
	}
	return append(args, argv...)
}

// Parse reads what Args wrote: the options and the command.
func Parse(args []string) (Options, []string, error) {
	var o Options
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.DurationVar(&o.Grace, "grace", 5*time.Second, "")
	fs.DurationVar(&o.SweepEvery, "sweep-every", 10*time.Second, "")
	fs.BoolVar(&o.ChildOnly, "child-only", false, "")
	fs.BoolVar(&o.Verbose, "verbose", false, "")
	fs.Uint64Var(&o.Ignored, "ignored", 0, "")
	if err := fs.Parse(args); err != nil {
		return o, nil, fmt.Errorf("%v; %s is started by `agentjail init`, which takes the flags (see agentjail init --help)", err, Name)
	}
	if fs.NArg() == 0 {
		return o, nil, errors.New("no command to run: write `agentjail init [flags] -- CMD [ARG...]`")
	}
	if o.Grace < 0 || o.SweepEvery < 0 {
		return o, nil, errors.New("--grace and --sweep-every cannot be negative")
	}
	return o, fs.Args(), nil
}

// Run runs argv as init's command (reaper.Init), with the periodic sweep
// of dead runs, and returns init's exit code: the command's, 128+n for
// death by signal n, 127 or 126 when it cannot be found or executed, 125
// for init's own failure. Init's messages go to stderr.
func Run(o Options, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "agentjail: init: "+format+"\n", args...)
	}
	ro := reaper.InitOptions{Grace: o.Grace, ChildOnly: o.ChildOnly, Warnf: logf, SweepEvery: o.SweepEvery, Ignored: o.Ignored}
	if o.Verbose {
		ro.Logf = logf
	}
	if o.SweepEvery > 0 {
		ro.Sweep = func() { runstate.SweepDeadRuns(logf) }
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	// Once started: what start-up touched need not stay resident.
	time.AfterFunc(time.Second, trimResident)
	code, err := reaper.Init(c, ro)
	switch {
	case err == nil:
		return code
	case c.Process != nil: // it ran; err reports what it left behind
		logf("%v", err)
		return code
	default:
		logf("%s: %v", argv[0], err)
		return startFailure(err)
	}
}

// startFailure is the shell's code for a command that could not be
// started: 127 not found, 126 found but not executable, else init's own
// failure.
func startFailure(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return 126
	}
	return record.ExitSetup
}

// Binary opens agentjail-init next to the running executable for Exec
// (hostfs.Sibling), or says why it is not used.
func Binary() (*os.File, error) { return hostfs.Sibling(Name) }

// Exec replaces this process with the agentjail-init Binary opened, for
// the command argv under o. It returns only on failure.
func Exec(bin *os.File, o Options, argv []string) error {
	// Through the descriptor's /proc link: what was checked is what runs.
	return syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", bin.Fd()), append([]string{Name}, o.Args(argv)...), os.Environ())
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/supervise"
)

// initFlags: each has an environment twin, as tini's do, so an image can
// set them without changing its ENTRYPOINT.
func initFlags() []cli.Flag {
	grace := 5 * time.Second // docker stop waits 10 s before its SIGKILL
	sweep := 10 * time.Second
	return []cli.Flag{
		&cli.GenericFlag{Name: "grace", Value: durationValue{&grace}, Sources: cli.EnvVars("AGENTJAIL_INIT_GRACE"),
			Usage: "time `D` the processes left when the command exits get between SIGTERM and SIGKILL"},
		&cli.BoolFlag{Name: "child-only", Sources: cli.EnvVars("AGENTJAIL_INIT_CHILD_ONLY"),
			Usage: "forward signals to the command alone, not to its process group"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Sources: cli.EnvVars("AGENTJAIL_INIT_VERBOSE"),
			Usage: "log every forwarded signal, reaped orphan and ended straggler to stderr"},
		&cli.GenericFlag{Name: "sweep-every", Value: durationValue{&sweep}, Sources: cli.EnvVars("AGENTJAIL_INIT_SWEEP_EVERY"),
			Usage: "end what runs whose supervisor died left behind, at start and every `D` (0: never)"},
	}
}

func (e appEnv) initAction(ctx context.Context, cmd *cli.Command) error {
	argv := commandArgs(cmd, e.rawAfter(cmd.Name))
	if len(argv) == 0 {
		return usageError{"no command to run: write `agentjail init [flags] -- CMD [ARG...]`"}
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(e.stderr, "agentjail: init: "+format+"\n", args...)
	}
	o := reaper.InitOptions{Grace: cmd.Value("grace").(time.Duration), ChildOnly: cmd.Bool("child-only"), Warnf: logf}
	if cmd.Bool("verbose") {
		o.Logf = logf
	}
	if o.SweepEvery = cmd.Value("sweep-every").(time.Duration); o.SweepEvery > 0 {
		o.Sweep = func() { supervise.SweepDeadRuns(logf) }
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = e.stdin, e.stdout, e.stderr
	code, err := reaper.Init(c, o)
	switch {
	case err == nil:
		*e.code = code
	case c.Process != nil: // it ran; err reports what it left behind
		logf("%v", err)
		*e.code = code
	default:
		logf("%s: %v", argv[0], err)
		*e.code = startFailure(err)
	}
	return nil
}

// startFailure is the shell's code for a command that could not be
// started: 127 not found, 126 found but not executable, else agentjail's
// own failure.
func startFailure(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return 126
	}
	return exitSetup
}

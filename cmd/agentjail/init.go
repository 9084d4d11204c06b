package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/internal/initcmd"
	"github.com/agentjail/agentjail/internal/sigstart"
	"github.com/agentjail/agentjail/launch"
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
		return launch.UsageError("no command to run: write `agentjail init [flags] -- CMD [ARG...]`")
	}
	o := initcmd.Options{
		Grace: cmd.Value("grace").(time.Duration), SweepEvery: cmd.Value("sweep-every").(time.Duration),
		ChildOnly: cmd.Bool("child-only"), Verbose: cmd.Bool("verbose"), Ignored: sigstart.Ignored(),
	}
	// Hand over to agentjail-init when this process's own streams are
	// init's (not when run is called with others, as in tests).
	if e.stdin == os.Stdin && e.stdout == os.Stdout && e.stderr == os.Stderr {
		bin, err := initcmd.Binary()
		if err == nil {
			err = fmt.Errorf("cannot start %s: %w", bin.Name(), initcmd.Exec(bin, o, argv))
			bin.Close()
		}
		if o.Verbose {
			fmt.Fprintf(e.stderr, "agentjail: init: %v; running in agentjail itself, with about twice the memory resident (put agentjail-init next to agentjail: make build does)\n", err)
		}
	}
	*e.code = initcmd.Run(o, argv, e.stdin, e.stdout, e.stderr)
	return nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/launcher"
)

func launcherFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "socket", Usage: "listen on `PATH` (default: launcher.sock in agentjail's run directory, where agentjail-run looks; elsewhere, set AGENTJAIL_LAUNCHER for agentjail-run)"},
		&cli.IntFlag{Name: "spares", Value: 1, Usage: "keep at least `N` workers waiting (as many as runs you start at once)"},
	}
}

// launcherAction serves the resident launcher until SIGINT, SIGTERM,
// SIGHUP (the terminal it was started at closed) or SIGQUIT: each stops
// it cleanly, its socket removed and its waiting workers ended.
func (e appEnv) launcherAction(ctx context.Context, cmd *cli.Command) error {
	if n := cmd.Int("spares"); n < 1 || n > 64 {
		return launch.UsageError(fmt.Sprintf("--spares %d: give 1 to 64 workers", n))
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	return launcher.Serve(ctx, launcher.Options{
		Socket: cmd.String("socket"), Spares: int(cmd.Int("spares")), Log: e.stderr,
		Ready: func(socket string) {
			fmt.Fprintf(e.stderr, "agentjail: launcher: listening on %s; agentjail-run starts runs through it\n", socket)
		},
	})
}

// worker is a launcher's worker: each request it takes is run as `agentjail
// run` with the client's arguments, in the client's streams, directory
// and environment (launcher.Work makes them the process's own).
func worker() int {
	err := launcher.Work(func(req launcher.Request, h launcher.Hooks) int {
		return runFor(context.Background(), append([]string{"agentjail", "run"}, req.Args...), os.Stdin, os.Stdout, os.Stderr,
			caller{ready: h.Ready, stalled: h.Stalled, rlimits: callerRlimits(req.Limits), job: h.Client})
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentjail: launcher: %v\n", err)
		return exitSetup
	}
	return exitOK
}

// callerRlimits names the client's resource limits as policies do.
func callerRlimits(limits []launcher.Limit) map[string]launch.CallerRlimit {
	names := make(map[int]string, len(execstage.Resources))
	for name, r := range execstage.Resources {
		names[r] = name
	}
	out := map[string]launch.CallerRlimit{}
	for _, l := range limits {
		if name, ok := names[l.Resource]; ok {
			out[name] = launch.CallerRlimit{Soft: l.Cur, Hard: l.Max}
		}
	}
	return out
}

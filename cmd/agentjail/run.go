package main

import (
	"context"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/launch"
)

// runAction runs the jail: the command line becomes a launch.Request, and
// launch.Run does the rest, down to the exit code.
func (e appEnv) runAction(ctx context.Context, cmd *cli.Command) error {
	req, err := request(cmd, commandArgs(cmd, e.rawAfter(cmd.Name)))
	if err != nil {
		return launch.SetupFailed(launch.Request{Profile: cmd.String("profile"), Record: cmd.String("record")}, err)
	}
	req.Log, req.Record, req.Results, req.Quiet = cmd.String("log"), cmd.String("record"), cmd.String("results"), cmd.Bool("quiet")
	req.CallerRlimits = e.caller.rlimits
	*e.code = launch.Run(req, launch.IO{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, Ready: e.caller.ready, Stalled: e.caller.stalled, Job: e.caller.job})
	return nil
}

// usageRecord writes the setup_failed record of a `run` whose command line
// urfave/cli could not parse (`--timeout soon`): it reports that before
// runAction, yet a record is promised whenever --record was given. raw is
// the command line after `run`; cmd knows which flags take a value.
func usageRecord(cmd *cli.Command, raw []string, err error) error {
	req := launch.Request{Profile: "tier1"}
	for i := 0; i < len(raw); i++ {
		a := raw[i]
		if a == "--" {
			req.Argv = raw[i+1:]
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			req.Argv = raw[i:]
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
			req.Record = val
		case "profile":
			req.Profile = val
		}
	}
	return launch.SetupFailed(req, err)
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

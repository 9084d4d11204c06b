package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/policy"
	"github.com/goccy/go-yaml"
	"github.com/urfave/cli/v3"
)

// profileJSON is one line of `agentjail profiles --json`.
type profileJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (e appEnv) profilesAction(ctx context.Context, cmd *cli.Command) error {
	l := launch.Loader(nil)
	enc := json.NewEncoder(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, name := range l.BuiltinNames() {
		p, err := l.Load(name)
		if err != nil {
			return err
		}
		if cmd.Bool("json") {
			if err := enc.Encode(profileJSON{name, p.Description}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, p.Description)
	}
	return tw.Flush()
}

func (e appEnv) profilesShowAction(ctx context.Context, cmd *cli.Command) error {
	if err := oneArgument(cmd, "write `agentjail profiles show NAME|FILE`", "`agentjail profiles show` shows one profile"); err != nil {
		return err
	}
	p, err := launch.Loader(nil).Load(cmd.Args().First())
	if err != nil {
		return err
	}
	// Checked as a run checks it: what is shown is a profile a run takes.
	if err := policy.Validate(p); err != nil {
		return err
	}
	// Shown as it applies: no mode is host.
	p.Network.Mode = p.NetMode()
	if cmd.Bool("json") {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	out, err := yaml.MarshalWithOptions(p, yaml.IndentSequence(true))
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(out)
	return err
}

// oneArgument refuses a command line without exactly one argument: none
// gets usage, several that the command (does) takes one.
func oneArgument(cmd *cli.Command, usage, does string) error {
	switch n := cmd.Args().Len(); {
	case n == 0:
		return launch.UsageError(usage)
	case n > 1:
		return launch.UsageError(fmt.Sprintf("%s, and got %d (%s): run it once for each", does, n, strings.Join(cmd.Args().Slice(), ", ")))
	}
	return nil
}

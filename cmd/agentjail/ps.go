package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/agentjail/agentjail/runstate"
	"github.com/agentjail/agentjail/runstate/live"
	"github.com/urfave/cli/v3"
)

// psAction lists the live runs of this user (root: of every run started as
// root), asking each supervisor for its counters. --json prints one object
// per line: run_id, profile, pid, child_pid, started_at, idle_ms, bytes.
func (e appEnv) psAction(ctx context.Context, cmd *cli.Command) error {
	if err := runstate.CheckRunDir(false); err != nil {
		return err
	}
	runs, err := runstate.Runs(runstate.LiveDir(), "/proc")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !cmd.Bool("json") {
		fmt.Fprintln(tw, "RUN ID\tPROFILE\tPID\tSTARTED\tIDLE\tSTDOUT\tSTDERR")
	}
	for _, st := range runs {
		if !st.Alive {
			continue // its supervisor died; `agentjail init` sweeps what it left
		}
		s, err := live.Query(st)
		if err != nil {
			// Alive but not answering (busy, or just ending): show what
			// the state file knows.
			s = live.Status{RunID: st.RunID, Profile: st.Profile, PID: st.PID, StartedAt: st.StartedAt, IdleMS: -1}
		}
		if cmd.Bool("json") {
			enc.Encode(s)
			continue
		}
		idle := "?"
		if s.IdleMS >= 0 {
			idle = (time.Duration(s.IdleMS) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\n", s.RunID, s.Profile, s.PID,
			time.Time(s.StartedAt).Local().Format(time.DateTime), idle, s.Bytes.Stdout, s.Bytes.Stderr)
	}
	return tw.Flush()
}

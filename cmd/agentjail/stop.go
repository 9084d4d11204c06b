package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentjail/agentjail/runstate"
	"github.com/agentjail/agentjail/runstate/live"
	"github.com/urfave/cli/v3"
)

// stopAction ends a live run exactly as a timeout would: SIGTERM to the
// jail, the grace, SIGKILL; the run ends with reason stopped and exit 124.
// It waits until the run has ended. ID may be a unique prefix.
func (e appEnv) stopAction(ctx context.Context, cmd *cli.Command) error {
	if err := oneArgument(cmd, "write `agentjail stop ID` (see `agentjail ps`)", "`agentjail stop` stops one run"); err != nil {
		return err
	}
	id := cmd.Args().First()
	if err := runstate.CheckRunDir(false); err != nil {
		return err
	}
	st, err := runstate.Find(runstate.LiveDir(), "/proc", id)
	if err != nil {
		return fmt.Errorf("%w; `agentjail ps` lists the live runs", err)
	}
	reason, code, err := live.Stop(st)
	if err != nil {
		return err
	}
	if cmd.Bool("json") {
		return json.NewEncoder(e.stdout).Encode(stopJSON{st.RunID, reason, code})
	}
	fmt.Fprintf(e.stdout, "%s: %s (exit %d)\n", st.RunID, reason, code)
	return nil
}

// stopJSON is `agentjail stop --json`: how the run ended, as its record
// says (reason, exit_code).
type stopJSON struct {
	RunID    string `json:"run_id"`
	Reason   string `json:"reason"`
	ExitCode int    `json:"exit_code"`
}

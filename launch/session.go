package launch

import (
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/runstate"
)

// session is what a launch holds on the host from before bwrap starts: the
// staging directory (until the run's results are taken from it) and the
// masks (until the jail has ended). Run and RunProbe open it alike, in one
// order: the reaper, then the staging, then the masks.
type session struct {
	staged *hostfs.Staged
	masks  *runstate.Masks
}

func (j *Jail) open() (*session, error) {
	if err := reaper.Begin(); err != nil {
		return nil, err
	}
	staged, err := j.stage()
	if err != nil {
		return nil, err
	}
	masks, err := runstate.HoldMasks(runstate.MaskDir(), j.Plan.Masks)
	if err != nil {
		staged.Remove()
		return nil, err
	}
	return &session{staged: staged, masks: masks}, nil
}

// endJail lets the masks go: call it once nothing of the jail runs.
func (s *session) endJail() error { return s.masks.Release() }

// remove deletes the staging directory.
func (s *session) remove() { s.staged.Remove() }

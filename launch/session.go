package launch

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/runstate"
)

// session is what a launch holds on the host around the jail: the masks
// (until the jail has ended) and the agent-homes directory (until the run's
// results are taken from it). Run and RunProbe open it alike, in one
// order: the reaper now (the masks are held since Prepare, in the look at
// their registry the plan was rendered in), the homes on the thread bwrap is
// started from (onStarter), where the private Claude Code directory's
// tmpfs is mounted in a mount namespace of that thread's own. When the
// run is over that thread ends and the namespace with it: the tmpfs is
// reached afterwards through claudeDir, a descriptor taken there, and
// nothing has to be unmounted.
type session struct {
	j     *Jail
	masks *runstate.Masks
	homes *hostfs.AgentHomes
	// claudeDir holds the private Claude Code directory open (O_PATH), nil
	// when the plan has none.
	claudeDir *os.File
	// sessions holds claude.dir's directory open, nil without one.
	sessions *hostfs.Dir
}

func (j *Jail) open() (*session, error) {
	if err := reaper.Begin(); err != nil {
		return nil, err
	}
	s := &session{j: j, masks: j.masks}
	j.masks = nil
	return s, nil
}

// onStarter makes the run's agent homes: supervise.Spec.OnStarter.
func (s *session) onStarter() error {
	var err error
	if s.homes, err = s.j.makeAgentHomes(); err != nil {
		return err
	}
	if home := s.j.Plan.Claude; home != nil && s.homes != nil {
		fd, err := unix.Open(home.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the run's Claude Code directory: %w", err)
		}
		s.claudeDir = os.NewFile(uintptr(fd), home.Dir)
	}
	s.sessions, err = s.j.bindSessions()
	return err
}

// claudePath is a path to the directory whose projects/ holds the run's
// Claude Code sessions, from any thread: claude.dir's, or the private
// directory, through the descriptor taken where it is mounted.
func (s *session) claudePath() string {
	switch {
	case s.sessions != nil:
		return s.sessions.FDPath()
	case s.claudeDir == nil:
		return ""
	}
	return fmt.Sprintf("/proc/self/fd/%d", s.claudeDir.Fd())
}

// endJail lets the masks go: call it once nothing of the jail runs.
func (s *session) endJail() error { return s.masks.Release() }

// remove lets the Claude Code directory go and deletes the homes
// directory.
func (s *session) remove() {
	s.masks.Release() // a run that failed before its jail ran did not endJail
	if s.claudeDir != nil {
		s.claudeDir.Close()
	}
	s.sessions.Close()
	s.homes.Remove()
}

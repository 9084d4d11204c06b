package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/policy"
)

// The directory that keeps Claude Code's sessions between runs
// (claude.dir, --claude-dir DIR). Claude resumes a session
// (--resume, --continue) from projects/<the start directory>/<session>.jsonl
// alone (measured with 2.1.197: everything else of its directory removed,
// the session resumed, its earlier turns sent again), so only DIR/projects
// is the run's: bound at ~/.claude/projects. Everything else of the
// private directory is copied in afresh each run (the login, ~/.claude.json,
// the settings, read-only), so no run can plant settings, hooks, a
// CLAUDE.md or a login for the next; what it can leave is a transcript,
// which the next run reads as the conversation so far.
//
// DIR is agentjail's user's own and 0700, DIR/projects the run user's. As
// root, agentjail binds DIR/projects into the agent-homes directory in the
// private mount namespace the jail is started from: bubblewrap, as the run
// user, never has to reach DIR, which no other run user can.

// claudeSessions checks the profile's claude.dir (nothing when it has none,
// or off) and returns the host path the plan binds at ~/.claude/projects:
// as root, where bindSessions binds DIR/projects; otherwise DIR/projects
// itself. What is missing is made when the run starts (bindSessions); what
// is there must be as it would be made.
func (j *Jail) claudeSessions(off bool) (string, error) {
	d := j.Policy.Claude.Dir
	if d == "" || off || !policy.On(j.Policy.Claude.Home) {
		return "", nil
	}
	at := j.Policy.Origins.Of("claude.dir")
	for _, r := range j.Policy.Filesystem.Write {
		if strings.HasPrefix(d+"/", strings.TrimSuffix(r, "/")+"/") {
			return "", fmt.Errorf("%s: claude.dir %s lies in the writable root %s: the agent could change what a later run resumes; choose a directory outside the writable roots", at, d, r)
		}
	}
	dir, err := j.walker().Dir(d)
	if err == nil {
		defer dir.Close()
		err = j.checkSessions(dir, nil)
	} else if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: claude.dir %w", at, err)
	}
	if os.Getuid() == 0 {
		return filepath.Join(AgentHomesDir(j.RunID), "sessions"), nil
	}
	return filepath.Join(d, "projects"), nil
}

// checkSessions checks DIR (dir), and DIR/projects if it is there (or as
// opened, projects): DIR agentjail's user's own and no one else's to read,
// projects a directory of the run user's.
func (j *Jail) checkSessions(dir, projects *hostfs.Dir) error {
	st, err := dir.Stat()
	if err != nil {
		return err
	}
	if int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is owned by uid %d, mode %04o: it must be agentjail's user's (uid %d) and no one else's to read, or other runs could read the sessions or plant one; fix with `chown %d %[1]s && chmod 700 %[1]s`",
			dir.Path, st.Uid, st.Mode&0o7777, os.Getuid(), os.Getuid())
	}
	if projects == nil {
		st, err = dir.Lstat("projects")
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	} else {
		st, err = projects.Stat()
	}
	switch {
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s/projects is not a directory; remove it", dir.Path)
	case int(st.Uid) != j.User.UID:
		return fmt.Errorf("%s/projects is owned by uid %d, not by the run user %s (uid %d); fix with `chown -R %d:%d %[1]s/projects`, or give each run user a directory of its own",
			dir.Path, st.Uid, j.User.Name, j.User.UID, j.User.UID, j.User.GID)
	}
	return nil
}

// bindSessions makes DIR and DIR/projects where missing, checks them
// again, now through descriptors, and as root binds DIR/projects where the
// plan expects it. It runs on the thread bwrap is started from, after the
// homes are made (in whose private mount namespace it binds). It returns DIR,
// held open for the transcripts (nil without claude.dir).
func (j *Jail) bindSessions() (*hostfs.Dir, error) {
	h := j.Plan.Claude
	if h == nil || h.Sessions == "" {
		return nil, nil
	}
	dir, err := j.walker().MkdirAll(j.Policy.Claude.Dir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("claude.dir: %w", err)
	}
	projects, err := dir.MkdirAll("projects", 0o700, j.User.UID, j.User.GID)
	if err == nil {
		defer projects.Close()
		err = j.checkSessions(dir, projects)
	}
	if err == nil && os.Getuid() == 0 {
		if err = os.Mkdir(h.Sessions, 0o700); err == nil {
			err = projects.Bind(h.Sessions)
		}
	}
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("claude.dir: %w", err)
	}
	return dir, nil
}

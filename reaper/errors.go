package reaper

import "errors"

var (
	// ErrNotStarted is returned by Start and Wait before Begin.
	ErrNotStarted = errors.New("reaper not started")
	// ErrSurvivors: processes were still alive after SIGKILL and the
	// bounded wait that follows it (uninterruptible sleep: NFS, FUSE, a
	// stuck driver). They are named in the error; init exits anyway.
	ErrSurvivors = errors.New("processes survived SIGKILL")
	// ErrForeignProc: the procfs given to find descendants belongs to
	// another pid namespace, so the pids it lists are not ours to signal.
	ErrForeignProc = errors.New("procfs shows another pid namespace")
)

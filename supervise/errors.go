package supervise

import "errors"

var (
	// ErrNotOurs: a process the supervisor was about to rely on is not the
	// one it started (wrong parent or marker).
	ErrNotOurs = errors.New("not this run's process")
	// ErrUnknownRun: no live run has the id given to Stop or Query.
	ErrUnknownRun = errors.New("no live run with this id")
	// ErrAmbiguousRun: an id prefix names more than one live run.
	ErrAmbiguousRun = errors.New("the id prefix names more than one live run")
)

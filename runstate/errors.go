package runstate

import "errors"

// Sentinels; compare with errors.Is.
var (
	// ErrUnknownRun: no live run has the id given to Stop or Query.
	ErrUnknownRun = errors.New("no live run with this id")
	// ErrAmbiguousRun: an id prefix names more than one live run.
	ErrAmbiguousRun = errors.New("the id prefix names more than one live run")
	// ErrRunDir: the run directory, or something in it, is not the
	// caller's alone (CheckRunDir).
	ErrRunDir = errors.New("agentjail's run directory is not yours alone")
)

package procs

import "errors"

// Sentinels; compare with errors.Is.
var (
	// ErrMountinfo: a mountinfo table does not parse.
	ErrMountinfo = errors.New("malformed mountinfo line")
	// ErrNotOurs: a process about to be relied on is not the one expected
	// (wrong parent or marker).
	ErrNotOurs = errors.New("not this run's process")
)

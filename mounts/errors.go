package mounts

import "errors"

// Sentinels; compare with errors.Is.
var (
	// ErrProcCovered: the jail cannot mount a fresh /proc (ProcCovers) and
	// the profile does not allow binding the existing one.
	ErrProcCovered = errors.New("cannot mount a fresh /proc in the jail")
	// ErrMountinfo: a mountinfo table does not parse.
	ErrMountinfo = errors.New("malformed mountinfo line")
)

package mounts

import "errors"

// Sentinels; compare with errors.Is.
var (
	// ErrProcCovered: the jail cannot mount a fresh /proc (ProcCovers) and
	// the profile does not allow binding the existing one.
	ErrProcCovered = errors.New("cannot mount a fresh /proc in the jail")
	// ErrProtectedLink: a protected path under a writable root is a
	// symlink, or lies beyond one, and the profile does not accept that.
	ErrProtectedLink = errors.New("symlinked protected path")
	// ErrMountinfo: a mountinfo table does not parse.
	ErrMountinfo = errors.New("malformed mountinfo line")
)

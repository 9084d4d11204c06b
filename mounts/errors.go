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
	// ErrGitFile: a git file agentjail must read to find what to protect
	// (a config, a .git file) is larger than it reads.
	ErrGitFile = errors.New("git file too large")
	// ErrUnreadable: a directory under a writable root cannot be read, so
	// what must be protected below it cannot be found.
	ErrUnreadable = errors.New("unreadable directory")
	// ErrTooManyArgs: protecting the writable roots takes more arguments
	// than bubblewrap accepts.
	ErrTooManyArgs = errors.New("too many bubblewrap arguments")
)

package hostfs

import "errors"

var (
	// ErrLink: a path below a writable root passes through a symbolic
	// link, which is never followed there (an agent may have planted it).
	ErrLink = errors.New("a symbolic link in a writable root, which agentjail never follows (an agent may have planted it)")
	// ErrForeignLink: a path outside the writable roots passes through a
	// symbolic link that is not the operator's (owned by another user
	// than root or agentjail's, or in a directory another user may
	// write): an agent of an earlier run, with other writable roots, may
	// have planted it.
	ErrForeignLink = errors.New("a symbolic link another user could have made or replaced, which agentjail does not follow")
	// ErrOutside: a path below a writable root leads out of it (..).
	ErrOutside = errors.New("leads out of its writable root")
	// ErrNotOwn: an existing file below a writable root is not a plain
	// file of the expected user's own, so it is not appended to.
	ErrNotOwn = errors.New("not a plain file of agentjail's own")
	// ErrTooLarge: a tree to copy holds more than its Budget.
	ErrTooLarge = errors.New("more than agentjail copies")
	// ErrMoved: a file agentjail had just put in place was replaced
	// before it could check it (another run's agent at work).
	ErrMoved = errors.New("replaced while agentjail wrote it")
)

package seccomp

import "errors"

var (
	// ErrSyntax is malformed JSON or a field of the wrong type.
	ErrSyntax = errors.New("invalid seccomp profile")
	// ErrUnknownSyscall is a syscall name known neither to libseccomp nor
	// to agentjail's own table.
	ErrUnknownSyscall = errors.New("unknown syscall")
	// ErrUnknownAction is an action name outside the OCI list.
	ErrUnknownAction = errors.New("unknown action")
	// ErrUnknownArch is an architecture name outside the OCI list.
	ErrUnknownArch = errors.New("unknown architecture")
	// ErrUnsupported is something a filter loaded by bubblewrap cannot do
	// (a notify listener, filter flags), or a build without libseccomp.
	ErrUnsupported = errors.New("not supported")
	// ErrBadRule is a rule libseccomp refuses (bad argument index, two
	// comparisons of one argument, ...).
	ErrBadRule = errors.New("invalid rule")
)

package bwrap

import "errors"

// Sentinels; compare with errors.Is.
var (
	ErrNotFound = errors.New("bubblewrap (bwrap) not found")
	ErrTooOld   = errors.New("bubblewrap is too old")
	ErrUnusable = errors.New("bubblewrap does not run")
	// ErrUnknownOption: a rendered plan holds an option missing from the
	// table of options (a bug of agentjail's).
	ErrUnknownOption = errors.New("unknown bwrap option")
)

// Install says how to get a usable bubblewrap; every error here ends with it.
const Install = "install bubblewrap >= 0.8.0: `apt-get install bubblewrap` (Debian 12, Ubuntu 24.04), `dnf install bubblewrap` (Fedora); or point AGENTJAIL_BWRAP at a bwrap binary"

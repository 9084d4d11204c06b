// Package execstage is the jail's last step before the agent, and the
// protocol that reaches it: the descriptors a launch hands to bwrap, the
// stage's command line (Words, Parse), the report it writes back
// (Report, ReadReport), and its control channel (control.go: Pair,
// SendControl, ReadControl), on which it hands the supervisor what only
// it can make inside the jail, such as a socket listening in the jail's
// network namespace. The stage makes those, applies the profile's
// rlimits to itself, closes every inherited descriptor but 0, 1 and 2,
// and execs the agent, reporting an execve failure exactly (126, 127)
// where bwrap alone cannot tell it from a setup failure.
//
// It runs inside the jail as a small static C program (cmd/agentjail-exec,
// installed beside agentjail: it starts in every launch, where a Go
// runtime's start-up would cost more than the rest of the stage) or, where
// that is not installed, as agentjail itself (Main). Both pass the same
// tests. The renderer (mounts) writes the protocol and the supervisor
// reads it; both use this package, so the two cannot drift apart. It must
// stay small: no policy, no YAML.
package execstage

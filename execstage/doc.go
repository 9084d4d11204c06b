// Package execstage is the jail's last step before the agent, and the
// protocol that reaches it: the descriptors a launch hands to bwrap, the
// stage's command line (Words, Parse), and the report it writes back
// (Report, ReadReport). The stage applies the profile's rlimits to
// itself, closes every inherited descriptor but 0, 1 and 2, and execs the
// agent, reporting an execve failure exactly (126, 127) where bwrap alone
// cannot tell it from a setup failure.
//
// It runs inside the jail as its own small static binary (cmd/
// agentjail-exec) or, where that is not installed, as agentjail itself.
// The renderer (mounts) writes the protocol and the supervisor reads it;
// both use this package, so the two cannot drift apart. It must stay
// small: no policy, no YAML, nothing the stage binary would not need.
package execstage

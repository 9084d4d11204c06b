// Package supervise runs one process tree to its end: it starts bwrap's
// argv as the run user (through the reaper, into a per-run cgroup where
// the host has one), learns the sandbox's pid from --json-status-fd and
// holds the sandbox on --block-fd until it holds a verified pidfd on it,
// passes the output through with capped excerpts, enforces the wall and
// idle limits, the cgroup's caps and `agentjail stop` (SIGTERM, grace,
// SIGKILL, bounded wait), forwards the signals agentjail receives, kills
// what is left (the cgroup, then the marker sweep) and drains the output.
// Run returns an Outcome: the record's supervision fields, filled.
//
// It must not render or decide policy: it carries out an argv it is given
// (launch builds it). It never signals PID 1, agentjail itself or its
// ancestors, and signals only through pidfds taken after checking them.
package supervise

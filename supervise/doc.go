// Package supervise runs one jail and ends it: it starts bwrap as the run
// user (through the reaper, into a per-run cgroup where cgroup v2 is
// writable), learns the sandbox's pid from bwrap's --json-status-fd and
// holds the sandbox on --block-fd until it has a verified pidfd on it, and
// runs the agent through its own exec stage (rlimits, exact 126/127). It
// passes the output through with capped excerpts, enforces the wall and
// idle timeouts and `agentjail stop` (SIGTERM, grace, SIGKILL, bounded
// wait), forwards the signals agentjail receives, kills what is left
// (cgroup.kill, then a /proc sweep for the run's marker) and writes the run
// record. After the run, ProtectedChanges (pure, given before and after
// snapshots; Quarantine moves a new .git or commondir aside first) and
// StripSetID say what the agent got around: the record's violations. Before a run it stages the files the plan binds from the
// host (copies owned by the run user, Stage); after it, it reads back only
// the run user's own plain files (CopyTranscripts, which writes them
// through hostfs, as WriteFile writes the record). It also keeps the
// live-run state that `agentjail ps`/`stop` read and that a sweeper
// (`agentjail init`) uses to clean up after a supervisor that died (Runs,
// Marked, KillMarked, SweepDead).
//
// It must not decide policy (that is policy/ and mounts/); it carries out a
// plan it is given. It never signals PID 1, agentjail itself or its
// ancestors, and signals processes only through pidfds taken after
// checking them. The /proc scanner takes the procfs root as a parameter.
package supervise

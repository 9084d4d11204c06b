// Package reaper makes this process a child subreaper
// (PR_SET_CHILD_SUBREAPER) and owns wait4(-1): exactly one goroutine reaps
// every child and every orphan re-parented to us, and hands the status of
// the children we started to whoever waits for them. It is the core of
// `agentjail init` (PID 1 in containers) and of `agentjail run`.
//
// Commands must be started with Start, never cmd.Start directly: Start
// registers the child under the same lock the reaping goroutine takes, so a
// child that exits at once is never mistaken for an orphan (the race of
// ramr/go-reaper#2; canonical/pebble's reaper is the model). cmd.Wait is
// still called, for its cleanup (pipes, goroutines); its ECHILD is expected.
//
// BeginAutoreap hands the reaping to the kernel where it can: SIGCHLD gets
// SA_NOCLDWAIT, so every child is released as it exits, and a started
// child's status is read from its pidfd (PIDFD_INFO_EXIT, Linux 6.15)
// instead. Init uses it unless it must log each orphan.
//
// Init is `agentjail init` itself: one command in its own process group
// (in the terminal's foreground), every signal init receives forwarded to
// that group, and when the command exits, EndDescendants: whatever it left
// behind gets SIGTERM, a grace period, then SIGKILL, and init returns only
// when nothing is left. The process and kernel work lives in _linux.go
// files; what a run is, what a profile allows and when a run must end are
// decided elsewhere (supervise/, cmd/).
package reaper

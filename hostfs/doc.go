// Package hostfs is operator-side file work on paths an agent may have
// touched: reached from descriptors, never through a link the agent could
// plant.
//
// agentjail writes the run record, appends the log and copies transcripts
// for the operator, often as root, to paths the operator named; such a path
// may lie in a writable root, where an agent of this run or an earlier one
// could have put a symbolic link, a file or a directory of its own. A
// Walker knows the run's writable roots. The part of a path above them is
// the operator's, and its links are followed when they are the operator's
// too (root's or agentjail's user's, in a directory no one else may
// write, or a sticky one): an earlier run's writable roots are not this
// run's, and its agent's links there are not followed; from a writable
// root down,
// the path is resolved from a descriptor of the root by openat2(2) with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS (before Linux 5.6, one
// O_NOFOLLOW|O_DIRECTORY component at a time). What is then done in a
// directory goes through its descriptor (a Dir): files are created O_EXCL
// and never opened through a link, owner and mode are set by fchown and
// fchmod, and a file is put in place by renameat(2), which replaces a name
// and never follows it.
//
// It must not decide what is written where (launch does), and it
// never resolves a path below a writable root twice: a caller opens the Dir
// it needs before the agent starts and holds it until it is done.
package hostfs

// Package procs reads and acts on the kernel's process tables: one parser
// of /proc/PID/stat, the marker scan of /proc/*/environ, process trees,
// kills through pidfds after checking what the pidfd names, and the
// mountinfo and cgroup files that say where a process's cgroups are.
//
// Every reader takes the procfs root as a parameter, so tests use fixture
// trees. It never signals PID 1, the caller or its ancestors (Guard), and
// signals only through pidfds taken before the target was checked again.
// It knows processes, not policies, records or runs.
package procs

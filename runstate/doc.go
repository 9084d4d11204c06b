// Package runstate is what agentjail keeps between and about runs in its
// run directory (/run/agentjail as root): the directory itself, checked to
// be the caller's alone; the live registry that `agentjail ps` and `stop`
// read (a state file and a control socket per run); the mask registry that
// lets concurrent runs share placeholders; and the sweep of what runs
// whose supervisor died left behind.
//
// Both binaries use it: agentjail, and agentjail-init, whose periodic
// sweep ends dead runs. So it must stay small: it knows processes, files
// and records, never policies, mounts or the YAML of profiles.
package runstate

// Package supervise runs one jail: it starts bwrap with the rendered plan as
// the run user, passes stdio through, learns the sandbox's pid and the
// agent's status from bwrap's --json-status-fd and from agentjail's own exec
// stage, and turns all of it into an exact result.
//
// It must not decide policy (that is policy/ and mounts/); it carries out a
// plan it is given.
package supervise

// Package launch owns a run from request to record: Prepare turns a
// Request into a Jail (profile loaded, merged and validated, run user
// picked, bwrap detected, seccomp compiled, the plan rendered, the
// environment built); Run takes it through its life in one sequence
// (outputs opened, dead runs swept, the homes made, masks, the live registry,
// supervise.Run, the post-run checks, the agent's output parsed, the
// record written); RunProbe is the same launch for doctor.
//
// It is the only package that brings rendering (mounts) and supervision
// (supervise) together. It prints what a run has to say on the stderr it
// is given; everything that reads flags stays in cmd/agentjail.
package launch

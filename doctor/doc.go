// Package doctor says whether agentjail, and the agent's own sandbox inside
// it, can work on this machine, and if not, why and how to fix it.
//
// It turns facts into checks, each pass, warn (worth knowing, nothing
// breaks) or fail, with a cause and a fix: facts about the host read through
// an fs.FS rooted at / (ReadHost; tests use fixture trees), the bwrap binary
// found, and the results of probes that cmd/agentjail runs inside the
// profile's real outer layer (Script, ParseProbes). The decisive checks are
// those probes: what the agent's own sandbox needs — a user namespace, a
// fresh /proc, a network namespace with loopback — tried where the agent
// will try it.
//
// It must not start processes or launch jails (cmd/agentjail does, through
// launch.RunProbe, and hands it the results), and it decides no policy: the run's own /proc decision is
// procs.ProcCovers, which the host-proc check reports.
package doctor

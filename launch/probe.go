package launch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/supervise"
)

// Probe is what a probe launch saw: the jail a run of the request would
// get, with the probe's command as the agent.
type Probe struct {
	// Jail is the prepared jail, nil when Prepare failed (Err says why).
	Jail *Jail
	// Covers are the mounts that keep bwrap from mounting a fresh /proc
	// here (procs.ProcCovers), whatever the profile does about them.
	Covers []string
	// Started: the jail started and the command exited by itself.
	Started        bool
	Stdout, Stderr string
	Err            error
	// Network is what the jail's network saw: in proxy mode, the
	// broker's record (did the probe's request reach it).
	Network *record.Network
}

// RunProbe launches req's jail as a run started with the current directory
// here would get it (its run user), from /, without the agents' private
// directories, with the profile's limits, and the same steps in the
// same order as Run. When a run would be refused because the host's /proc
// is covered, it launches with a fresh /proc anyway, so that the report
// carries the kernel's own verdict.
func RunProbe(req Request, here string) Probe {
	opt := Options{Dir: "/", UserDir: here, NoAgentHomes: true}
	j, err := Prepare(req, opt)
	if errors.Is(err, mounts.ErrProcCovered) {
		opt.FreshProc = true
		j, err = Prepare(req, opt)
	}
	if err != nil {
		return Probe{Err: err}
	}
	defer j.Release()
	p := Probe{Jail: j, Covers: hostProcCovers(j.Bwrap, j.Policy)}
	var stdout, stderr bytes.Buffer
	spec := j.baseSpec(strings.NewReader(""), &stdout, &stderr)
	sess, err := j.open()
	if err != nil {
		p.Err = err
		return p
	}
	defer sess.remove()
	spec.OnStarter = sess.onStarter
	nr := j.startNetwork(&spec, func(l string) { fmt.Fprintf(&stderr, "agentjail: %s\n", l) })
	out, err := supervise.Run(spec)
	j.network(nr, &out.Record)
	p.Network = out.Record.Network
	if merr := sess.endJail(); merr != nil && err == nil {
		err = merr
	}
	p.Started = err == nil && out.Record.Reason == record.ReasonExit
	p.Stdout, p.Stderr = stdout.String(), stderr.String()
	if err != nil && p.Stderr == "" {
		p.Stderr = err.Error()
	}
	return p
}

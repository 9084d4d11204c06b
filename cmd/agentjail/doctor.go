package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"
	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/doctor"
	"github.com/agentjail/agentjail/internal/initcmd"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/reaper"
)

// exitDoctorFailed: doctor found a check that fails.
const exitDoctorFailed = 1

// doctorAction reads the host, launches the profile's real jail with the
// probe script as the agent, and reports. It exits 0 when nothing fails.
func (e appEnv) doctorAction(ctx context.Context, cmd *cli.Command) error {
	h := doctor.ReadHost(os.DirFS("/"))
	if dir := doctor.CgroupDir(h); dir != "" {
		h.CgroupWritable = unix.Access(dir, unix.W_OK) == nil
	}
	if f, err := initcmd.Binary(); err == nil {
		h.InitBinary = f.Name()
		f.Close()
	} else {
		h.InitWhyNot = err.Error()
	}
	h.KernelReaps = reaper.KernelReaps()
	h.Root = os.Geteuid() == 0
	info, bErr := bwrap.Detect(launch.CacheDir())
	j := probeJail(cmd)
	// A profile or flag mistake is bad input (125), not a finding.
	for _, bad := range []error{launch.ErrUsage, launch.ErrNoRunUser, policy.ErrUnknownProfile, policy.ErrSyntax, policy.ErrInvalid} {
		if errors.Is(j.Err, bad) {
			return j.Err
		}
	}
	rep := doctor.Diagnose(h, info, bErr, j)
	if !rep.OK {
		*e.code = exitDoctorFailed
	}
	if cmd.Bool("json") {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	user := j.User
	if user == "" {
		user = "unknown"
	}
	fmt.Fprintf(e.stdout, "agentjail doctor: profile %s, run user %s\n", j.Profile, user)
	rep.WriteText(e.stdout)
	return nil
}

// probeJail launches, through launch.RunProbe, the jail a run of the
// profile started in the current directory would get, with doctor.Script
// as the agent, and hands doctor what it saw.
func probeJail(cmd *cli.Command) doctor.Jail {
	dj := doctor.Jail{Profile: cmd.String("profile")}
	here, _ := os.Getwd()
	req := launch.Request{Profile: dj.Profile, User: cmd.String("user"), Argv: []string{"sh", "-c", doctor.Script}}
	p := launch.RunProbe(req, here)
	dj.Err, dj.Started, dj.Stderr = p.Err, p.Started, p.Stderr
	if j := p.Jail; j != nil {
		dj.Sealed = j.Policy.InnerSandbox == policy.InnerSealed
		dj.User = fmt.Sprintf("%s (uid %d)", j.User.Name, j.User.UID)
		dj.Covers = p.Covers
		dj.Fallback = j.Policy.Filesystem.Proc == policy.ProcFreshOrBind
		dj.Degraded = len(j.Plan.Degradations) > 0
		dj.NetMode = j.Policy.NetMode()
	}
	if p.Network != nil {
		dj.Broker = p.Network.Broker
	}
	dj.Probes = doctor.ParseProbes(p.Stdout)
	return dj
}

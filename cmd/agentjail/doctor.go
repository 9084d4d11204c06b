package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/doctor"
	"github.com/agentjail/agentjail/internal/initcmd"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/supervise"
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
	if f, why := initcmd.Binary(); f != nil {
		h.InitBinary = f.Name()
		f.Close()
	} else {
		h.InitWhyNot = why
	}
	h.KernelReaps = reaper.KernelReaps()
	info, bErr := bwrap.Detect(cacheDir())
	j := probeJail(cmd)
	// A profile or flag mistake is bad input (125), not a finding.
	for _, bad := range []error{errUsage, policy.ErrUnknownProfile, policy.ErrSyntax, policy.ErrInvalid} {
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

// probeJail launches the jail a run of the profile started in the current
// directory would get (its run user), from /, with doctor.Script as the
// agent. When a run would refuse because the host's
// /proc is covered, it launches with a fresh /proc anyway, so that the
// report carries the kernel's own verdict.
func probeJail(cmd *cli.Command) doctor.Jail {
	dj := doctor.Jail{Profile: cmd.String("profile")}
	argv := []string{"sh", "-c", doctor.Script}
	// The run user is the one a run started here would get.
	here, _ := os.Getwd()
	j, err := prepareWith(cmd, argv, jailOptions{dir: "/", userDir: here, noClaudeHome: true})
	if errors.Is(err, mounts.ErrProcCovered) {
		j, err = prepareWith(cmd, argv, jailOptions{dir: "/", userDir: here, freshProc: true, noClaudeHome: true})
	}
	if err != nil {
		dj.Err = err
		return dj
	}
	defer j.release()
	dj.Sealed = j.policy.InnerSandbox == policy.InnerSealed
	dj.User = fmt.Sprintf("%s (uid %d)", j.user.Name, j.user.UID)
	dj.Covers = hostProcCovers(j.bwrap, j.policy)
	dj.Fallback = j.policy.Filesystem.Proc == policy.ProcFreshOrBind
	dj.Degraded = len(j.plan.Degradations) > 0

	var stdout, stderr bytes.Buffer
	// The probe runs as a run would, with the profile's limits.
	spec := j.baseSpec(strings.NewReader(""), &stdout, &stderr)
	if err := reaper.Begin(); err != nil {
		dj.Err = err
		return dj
	}
	masks, err := supervise.HoldMasks(supervise.MaskDir(), j.plan.Masks)
	if err != nil {
		dj.Err = err
		return dj
	}
	staged, err := j.stage()
	if err != nil {
		masks.Release()
		dj.Err = err
		return dj
	}
	defer staged.Remove()
	res, err := supervise.Run(spec)
	if merr := masks.Release(); merr != nil && err == nil {
		err = merr
	}
	dj.Started = err == nil && res.Reason == supervise.ReasonExit
	dj.Stderr = stderr.String()
	if err != nil && dj.Stderr == "" {
		dj.Stderr = err.Error()
	}
	dj.Probes = doctor.ParseProbes(stdout.String())
	return dj
}

package main

import (
	"context"
	"fmt"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/supervise"
)

func (e appEnv) runAction(ctx context.Context, cmd *cli.Command) error {
	j, err := prepare(cmd, commandArgs(cmd, e.rawAfter(cmd.Name)))
	if err != nil {
		return err
	}
	defer closeAll(j.seccomp)
	for _, w := range j.plan.Warnings {
		fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", w)
	}
	for _, d := range j.plan.Degradations {
		fmt.Fprintf(e.stderr, "agentjail: degraded: %s\n", d)
	}
	spec := supervise.Spec{
		Bwrap:   j.bwrap.Path,
		Args:    j.plan.Args,
		Env:     j.env,
		Stdin:   e.stdin,
		Stdout:  e.stdout,
		Stderr:  e.stderr,
		Seccomp: j.seccomp,
	}
	if syscall.Getuid() == 0 && j.user.UID != 0 {
		spec.Cred = &syscall.Credential{Uid: uint32(j.user.UID), Gid: uint32(j.user.GID), Groups: uint32s(j.user.Groups)}
	}
	masks, err := supervise.HoldMasks(maskDir(), j.plan.Masks)
	if err != nil {
		return err
	}
	res, err := supervise.Run(spec)
	if merr := masks.Release(); merr != nil {
		printError(e.stderr, merr)
	}
	*e.code = res.ExitCode
	if err != nil {
		printError(e.stderr, err)
	}
	return nil
}

func uint32s(in []int) []uint32 {
	out := make([]uint32, len(in))
	for i, v := range in {
		out[i] = uint32(v)
	}
	return out
}

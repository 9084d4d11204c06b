package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/seccomp"
)

// seccompExportAction prints a profile's built-in filter, or the profile
// for the container agentjail runs in, as OCI seccomp JSON.
func (e appEnv) seccompExportAction(ctx context.Context, cmd *cli.Command) error {
	ref, forContainer := cmd.String("profile"), cmd.Bool("for-container")
	if (ref == "") == !forContainer {
		return launch.UsageError("seccomp export: give exactly one of --profile NAME|FILE and --for-container")
	}
	var f seccomp.Filter
	if forContainer {
		var err error
		if f, err = seccomp.ForContainer(); err != nil {
			return err
		}
	} else {
		p, err := launch.Loader(nil).Load(ref)
		if err != nil {
			return err
		}
		if err := policy.Validate(p); err != nil {
			return err
		}
		if p.Seccomp.Default != nil && !*p.Seccomp.Default {
			return fmt.Errorf("profile %s sets seccomp.default: false: it has no built-in filter to export", ref)
		}
		f = seccomp.Builtin(p.InnerSandbox == policy.InnerSealed)
		if len(p.Seccomp.Files) > 0 {
			fmt.Fprintf(e.stderr, "agentjail: note: %s also applies %v on top of this filter; a container runtime takes one profile\n", ref, p.Seccomp.Files)
		}
	}
	// Compiling checks every name against libseccomp before anything is
	// printed.
	if _, err := seccomp.Compile(f); err != nil {
		return err
	}
	data, err := seccomp.Export(f)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(data)
	return err
}

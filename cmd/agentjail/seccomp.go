package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/seccomp"
)

// seccompFiles compiles the policy's filters into sealed memfds for bwrap's
// --add-seccomp-fd, in order. A signal on interrupt ends a wait for a
// seccomp file that is a pipe.
func seccompFiles(p policy.Policy, interrupt <-chan os.Signal) ([]*os.File, error) {
	read := func(name string) ([]byte, error) { return readInput(name, interrupt) }
	filters, err := seccomp.Filters(p, read, seccomp.CurrentHost())
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for i, f := range filters {
		bpf, err := seccomp.Compile(f)
		var file *os.File
		if err == nil {
			file, err = seccomp.File(strconv.Itoa(i), bpf)
		}
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// seccompExportAction prints a profile's built-in filter, or the profile
// for the container agentjail runs in, as OCI seccomp JSON.
func (e appEnv) seccompExportAction(ctx context.Context, cmd *cli.Command) error {
	ref, forContainer := cmd.String("profile"), cmd.Bool("for-container")
	if (ref == "") == !forContainer {
		return usageError{"seccomp export: give exactly one of --profile NAME|FILE and --for-container"}
	}
	var f seccomp.Filter
	if forContainer {
		var err error
		if f, err = seccomp.ForContainer(); err != nil {
			return err
		}
	} else {
		p, err := loader(nil).Load(ref)
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

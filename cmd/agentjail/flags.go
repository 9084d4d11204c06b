package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/policy"
)

// durationValue is a flag.Value for durations in agentjail's syntax: Go
// durations ("90s", "10m") or bare seconds, never negative. urfave's own
// DurationFlag accepts negatives and refuses bare numbers.
type durationValue struct{ d *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := policy.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Get() any { return *v.d }

func durationFlag(name, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Usage: usage, Value: durationValue{new(time.Duration)}}
}

// jailFlags are shared by run and render: both must see the same jail.
func jailFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "profile", Value: "tier1", Usage: "built-in profile `NAME` or profile FILE"},
		&cli.StringFlag{Name: "user", Usage: "run the agent as `USER` (name or uid)"},
		&cli.StringSliceFlag{Name: "write", Usage: "add a writable root `PATH` (repeatable)"},
		&cli.StringSliceFlag{Name: "read", Usage: "bind `PATH` read-only (repeatable)"},
		&cli.StringFlag{Name: "chdir", Usage: "start the agent in `DIR` (default: the current directory)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the jail; K alone passes agentjail's own value (repeatable)"},
		&cli.StringSliceFlag{Name: "seccomp", Usage: "add a Docker/OCI seccomp `FILE` on top of the profile's filter (repeatable)"},
		durationFlag("timeout", "wall-clock limit `D` (90s, 10m, or seconds; 0: none; default: the profile's)"),
		durationFlag("idle-timeout", "end the run after `D` without output (0: none; default: the profile's)"),
		durationFlag("grace", "time `D` between SIGTERM and SIGKILL (default: the profile's)"),
		&cli.StringFlag{Name: "log", Usage: "append both output streams to `FILE`"},
		&cli.StringFlag{Name: "record", Usage: "write the run record (JSON) to `FILE`"},
	}
}

// overlay turns the command line into a policy layer on top of the profile,
// with each value's origin the flag that set it.
func overlay(cmd *cli.Command) (policy.Policy, error) {
	p := policy.Policy{User: cmd.String("user"), Origins: policy.Origins{}}
	if p.User != "" {
		p.Origins["user"] = "--user"
	}
	// Paths on the command line are relative to the current directory, as
	// a shell user expects; only profiles must spell them absolute.
	list := func(flag, field string, dst *[]string) {
		for i, v := range cmd.StringSlice(flag) {
			p.Origins[fmt.Sprintf("%s[%d]", field, i)] = "--" + flag
			if abs, err := filepath.Abs(v); err == nil && v != "" && !strings.HasPrefix(v, "~") && !strings.HasPrefix(v, "${") {
				v = abs
			}
			*dst = append(*dst, v)
		}
	}
	list("write", "filesystem.write", &p.Filesystem.Write)
	list("read", "filesystem.read", &p.Filesystem.Read)
	list("seccomp", "seccomp.files", &p.Seccomp.Files)
	for _, kv := range cmd.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			// --env NAME passes agentjail's own value, which then never
			// shows on its command line (/proc/PID/cmdline is world-readable).
			if v, ok = os.LookupEnv(k); !ok {
				return p, fmt.Errorf("--env %q: %s is not set in agentjail's environment; export it, or write %s=VALUE", kv, k, k)
			}
		}
		if p.Environment.Set == nil {
			p.Environment.Set = map[string]string{}
		}
		p.Environment.Set[k] = v
		p.Origins["environment.set["+k+"]"] = "--env"
	}
	for _, f := range []struct {
		flag, field string
		dst         **policy.Duration
	}{
		{"timeout", "limits.wall", &p.Limits.Wall},
		{"idle-timeout", "limits.idle", &p.Limits.Idle},
		{"grace", "limits.grace", &p.Limits.Grace},
	} {
		if cmd.IsSet(f.flag) {
			d := policy.Duration(cmd.Value(f.flag).(time.Duration))
			*f.dst = &d
			p.Origins[f.field] = "--" + f.flag
		}
	}
	return p, nil
}

// commandArgs returns the jailed command and its arguments. With StopOnNthArg
// set to 1, urfave/cli v3 still drops one "--" right after the command name
// (`run sh -- x` becomes [sh x]); raw is the command line after the
// subcommand, so the dropped "--" can be put back.
func commandArgs(cmd *cli.Command, raw []string) []string {
	got := cmd.Args().Slice()
	if len(got) == 0 || len(raw) < len(got)+1 || slices.Equal(raw[len(raw)-len(got):], got) {
		return got
	}
	tail := raw[len(raw)-len(got)-1:]
	if tail[0] == got[0] && tail[1] == "--" && slices.Equal(tail[2:], got[1:]) {
		return tail
	}
	return got
}

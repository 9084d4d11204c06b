package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/launch"
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

// durationFlag is a duration whose absence leaves the profile's value.
func durationFlag(name, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Usage: usage, Value: durationValue{new(time.Duration)}, DefaultText: "the profile's"}
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
		&cli.StringFlag{Name: "net", Usage: "network `MODE`: host, none, or proxy (out only through agentjail's broker; default: the profile's)"},
		&cli.StringSliceFlag{Name: "allow-net", Usage: "let the jail reach `HOST[:PORT]` through the broker (*.DOMAIN, IP, CIDR; port 443 unless given; repeatable; implies --net proxy)"},
		&cli.StringFlag{Name: "api-key-file", Usage: "the Anthropic API key, from `FILE` (with --net proxy only the broker holds it)"},
		durationFlag("timeout", "wall-clock limit `D` (90s, 10m, or seconds; 0: none)"),
		durationFlag("idle-timeout", "end the run after `D` without output (0: none)"),
		durationFlag("grace", "time `D` between SIGTERM and SIGKILL"),
		&cli.StringFlag{Name: "log", Usage: "append both output streams to `FILE`"},
		&cli.StringFlag{Name: "record", Usage: "write the run record (JSON) to `FILE`"},
		&cli.StringFlag{Name: "claude-dir", Usage: "keep Claude Code's sessions between runs in `DIR`, for claude --resume and --continue"},
		&cli.BoolFlag{Name: "tty", Usage: "give the agent a terminal of its own even when stdin or stdout is not one (default: when both are)"},
		&cli.BoolFlag{Name: "no-tty", Usage: "give the agent pipes even at a terminal"},
		&cli.BoolFlag{Name: "allow-clipboard", Usage: "let the agent's clipboard writes (OSC 52) reach the terminal"},
	}
}

// request is the jail's part of a run or render command line: what
// jailFlags set, and argv; a command line without a command is a usage
// error naming the subcommand.
func request(cmd *cli.Command, argv []string) (launch.Request, error) {
	if len(argv) == 0 {
		return launch.Request{}, launch.UsageError("no command to run: write `agentjail " + cmd.Name + " [flags] -- CMD [ARG...]`")
	}
	// An empty value would be taken for no flag at all (--record "" wrote
	// no record, silently).
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && cmd.IsSet(sf.Name) && cmd.String(sf.Name) == "" {
			return launch.Request{}, launch.UsageError(fmt.Sprintf("--%s was given an empty value: give one, or leave the flag out", sf.Name))
		}
	}
	req := launch.Request{
		Profile: cmd.String("profile"), User: cmd.String("user"), Chdir: cmd.String("chdir"),
		Write: cmd.StringSlice("write"), Read: cmd.StringSlice("read"), Seccomp: cmd.StringSlice("seccomp"),
		Env: cmd.StringSlice("env"), ClaudeDir: cmd.String("claude-dir"), Argv: argv,
		Net: cmd.String("net"), AllowNet: cmd.StringSlice("allow-net"), APIKeyFile: cmd.String("api-key-file"),
	}
	switch {
	case cmd.Bool("tty") && cmd.Bool("no-tty"):
		return launch.Request{}, launch.UsageError("--tty and --no-tty contradict each other: give one")
	case cmd.Bool("tty"):
		req.TTY = launch.TTYOn
	case cmd.Bool("no-tty"):
		req.TTY = launch.TTYOff
	}
	req.AllowClipboard = cmd.Bool("allow-clipboard")
	for flag, dst := range map[string]**time.Duration{"timeout": &req.Timeout, "idle-timeout": &req.IdleTimeout, "grace": &req.Grace} {
		if cmd.IsSet(flag) {
			d := cmd.Value(flag).(time.Duration)
			*dst = &d
		}
	}
	return req, nil
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

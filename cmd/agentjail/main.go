// Command agentjail runs AI coding agents inside a policy-driven bubblewrap
// jail and supervises them until they are done, hung, or dead.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/launcher"
	"github.com/agentjail/agentjail/record"
	"github.com/urfave/cli/v3"
)

// Exit codes of agentjail's own, beyond the jailed command's pass-through.
const (
	exitOK    = 0
	exitSetup = record.ExitSetup // 125: bad input, bad policy, bwrap missing, setup failed
)

// version is stamped by `make release` (-ldflags "-X main.version=...").
var version = "dev"

// The main goroutine keeps the main thread (launcher.Anchor).
func init() { runtime.LockOSThread() }

func main() {
	// Bound into a jail as its exec stage where agentjail-exec is not
	// installed beside it (execstage.Binary).
	if execstage.IsStage(os.Args[0]) {
		os.Exit(execstage.Main(os.Args[1:]))
	}
	if launcher.IsWorker(os.Args[0]) {
		os.Exit(launcher.Anchor(worker))
	}
	os.Exit(launcher.Anchor(func() int { return run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr) }))
}

// run is agentjail with its arguments and streams; it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runFor(ctx, args, stdin, stdout, stderr, caller{})
}

// caller is what a run started for another process (the launcher's
// worker's client) hands launch beside the command line: see launch.IO
// and launch.Request.CallerRlimits.
type caller struct {
	ready, stalled func()
	rlimits        map[string]launch.CallerRlimit
	job            int // launch.IO.Job
}

// runFor is run for a caller.
func runFor(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, from caller) int {
	if len(args) < 2 {
		// A usage error: on stderr, exit 125, never help on stdout.
		fmt.Fprintln(stderr, "agentjail: no command: write `agentjail run -- CMD [ARG...]`, or see `agentjail --help` for render, init, ps, stop, profiles, schema, seccomp, doctor and version")
		return exitSetup
	}
	code := exitOK
	app := newApp(args, stdin, stdout, stderr, &code, from)
	if err := app.Run(ctx, args); err != nil {
		launch.PrintError(stderr, errors.New(plainFlagError(err.Error())))
		return exitSetup
	}
	return code
}

var (
	flagGoType  = regexp.MustCompile(` as main\.durationValue value`)
	flagOneDash = regexp.MustCompile(`for flag -?([a-z][a-z-]*)`)
	// Go's flag package names an unknown flag with one dash, whichever
	// the operator typed; every flag of agentjail's takes two.
	unknownOneDash = regexp.MustCompile(`^flag provided but not defined: -([a-z][a-z0-9-]+)`)
)

// plainFlagError rewrites urfave/cli's flag messages for an operator: no Go
// type names, flags spelled as they are typed (--timeout), and a fix where
// the library gives none.
func plainFlagError(msg string) string {
	msg = flagGoType.ReplaceAllString(msg, " as a duration")
	msg = flagOneDash.ReplaceAllString(msg, "for flag --$1")
	msg = unknownOneDash.ReplaceAllString(msg, "flag provided but not defined: --$1")
	if strings.Contains(msg, " as bool value ") {
		msg = strings.Replace(msg, " as bool value ", " as true or false ", 1)
		msg = strings.Replace(msg, ": parse error", ": write true or false (or 1 or 0)", 1)
	}
	return msg
}

func newApp(args []string, stdin io.Reader, stdout, stderr io.Writer, code *int, from caller) *cli.Command {
	one := 1
	env := appEnv{args: args, stdin: stdin, stdout: stdout, stderr: stderr, code: code, caller: from}
	usage := func(ctx context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
		uerr := launch.UsageError(fmt.Sprintf("%s (see `%s --help`)", plainFlagError(err.Error()), cmd.FullName()))
		if cmd.Name == "run" {
			return usageRecord(cmd, env.rawAfter("run"), uerr)
		}
		return uerr
	}
	sub := func(c *cli.Command) *cli.Command {
		c.OnUsageError = usage
		c.DisableSliceFlagSeparator = true
		c.ShellComplete = complete
		c.HideHelpCommand = true // --help is enough; `run help` would be a command named help
		if action := c.Action; action != nil && c.ArgsUsage == "" {
			// A command that takes no arguments says so, rather than
			// ignore a mistyped flag or path.
			c.Action = func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Present() {
					return launch.UsageError(fmt.Sprintf("%s takes no arguments, got %q (see `%s --help`)", cmd.FullName(), cmd.Args().Slice(), cmd.FullName()))
				}
				return action(ctx, cmd)
			}
		}
		return c
	}
	return &cli.Command{
		Name:      "agentjail",
		Usage:     "run AI coding agents in a policy-driven bubblewrap jail",
		Version:   version,
		Writer:    stdout,
		ErrWriter: stderr,
		Reader:    stdin,
		// Errors are printed once, by run, and never call os.Exit.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		OnUsageError:   usage,
		CommandNotFound: func(ctx context.Context, cmd *cli.Command, name string) {
			fmt.Fprintf(stderr, "agentjail: unknown command %q (see `agentjail --help`)\n", name)
			*code = exitSetup
		},
		// `agentjail completion bash|zsh|fish` prints a script that asks
		// agentjail itself (--generate-shell-completion) what may follow:
		// commands, flags, and after --profile the built-in profiles.
		EnableShellCompletion: true,
		ConfigureShellCompletionCommand: func(c *cli.Command) {
			c.Hidden = false
			c.Usage = "print the completion script of a shell: bash, zsh or fish"
			c.Description = completionHelp
			c.Commands = slices.DeleteFunc(c.Commands, func(sh *cli.Command) bool { return sh.Name == "pwsh" })
			for _, sh := range c.Commands {
				sh.Usage = "print the " + sh.Name + " completion script"
				sub(sh)
			}
			sub(c)
			c.CommandNotFound = func(ctx context.Context, cmd *cli.Command, name string) {
				fmt.Fprintf(stderr, "agentjail: no completion script for %q: give bash, zsh or fish\n", name)
				*code = exitSetup
			}
		},
		Commands: []*cli.Command{
			sub(&cli.Command{
				Name:         "run",
				Usage:        "run a command in the jail",
				ArgsUsage:    "-- CMD [ARG...]",
				StopOnNthArg: &one,
				Flags: append(jailFlags(),
					&cli.StringFlag{Name: "results", Usage: "copy Claude Code's session transcripts into `DIR` after the run"},
					&cli.BoolFlag{Name: "quiet", Usage: "say only errors and how the run ended; warnings and degradations go to the record alone"}),
				Action: env.runAction,
			}),
			sub(&cli.Command{
				Name:         "render",
				Usage:        "print the exact bwrap command line a run would use",
				ArgsUsage:    "-- CMD [ARG...]",
				StopOnNthArg: &one,
				Flags:        append(jailFlags(), &cli.BoolFlag{Name: "json", Usage: "print the plan as JSON (argv, fds, env names, user)"}),
				Action:       env.renderAction,
			}),
			sub(&cli.Command{
				Name:   "launcher",
				Usage:  "keep agentjail started ahead, for agentjail-run to launch runs through (see docs/launcher.md)",
				Flags:  launcherFlags(),
				Action: env.launcherAction,
			}),
			sub(&cli.Command{
				Name:   "ps",
				Usage:  "list live runs",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object per run"}},
				Action: env.psAction,
			}),
			sub(&cli.Command{
				Name:      "stop",
				Usage:     "end a live run as a timeout would (SIGTERM, grace, SIGKILL)",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: `print {"run_id", "reason", "exit_code"}`}},
				Action:    env.stopAction,
			}),
			sub(&cli.Command{
				Name:         "init",
				Usage:        "run a command as PID 1 or a subreaper: reap zombies, forward signals, end stragglers",
				ArgsUsage:    "[--] CMD [ARG...]",
				StopOnNthArg: &one,
				Flags:        initFlags(),
				Action:       env.initAction,
			}),
			sub(&cli.Command{
				Name:   "profiles",
				Usage:  "list the built-in profiles",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: `print one {"name", "description"} per profile`}},
				Action: env.profilesAction,
				Commands: []*cli.Command{sub(&cli.Command{
					Name:      "show",
					Usage:     "print a profile resolved (extends merged) as YAML",
					ArgsUsage: "NAME|FILE",
					Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print it as JSON (the keys of agentjail schema)"}},
					Action:    env.profilesShowAction,
				})},
			}),
			sub(&cli.Command{
				Name:  "seccomp",
				Usage: "seccomp profiles for container runtimes",
				Commands: []*cli.Command{sub(&cli.Command{
					Name:  "export",
					Usage: "print a profile's built-in filter, or a profile for the container that runs agentjail, as OCI seccomp JSON",
					Flags: []cli.Flag{
						&cli.StringFlag{Name: "profile", Usage: "built-in profile `NAME` or profile FILE"},
						&cli.BoolFlag{Name: "for-container", Usage: "Docker's default denials plus what agentjail and bubblewrap need to build namespaces"},
					},
					Action: env.seccompExportAction,
				})},
			}),
			sub(&cli.Command{
				Name:   "schema",
				Usage:  "print the JSON Schema of profiles",
				Action: env.schemaAction,
			}),
			sub(&cli.Command{
				Name:  "doctor",
				Usage: "check that jails, and the agent's own sandbox inside them, work here; say why not and how to fix it",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "profile", Value: "tier1", Usage: "probe the jail of built-in profile `NAME` or profile FILE"},
					&cli.StringFlag{Name: "user", Usage: "probe as run user `USER` (name or uid)"},
					&cli.BoolFlag{Name: "json", Usage: `print {"ok", "checks": [{"name", "status", "detail", "cause", "fix"}]}`},
				},
				Action: env.doctorAction,
			}),
			sub(&cli.Command{
				Name:   "version",
				Usage:  "print agentjail's and bubblewrap's versions",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: `print {"version", "go", "os", "arch", "bwrap": {"path", "version", "setuid", "error"}}`}},
				Action: env.versionAction,
			}),
		},
	}
}

// completionHelp is `agentjail completion --help`'s description.
const completionHelp = `The script asks agentjail what may follow on the command line: its commands, their flags, and
after --profile (or profiles show) the built-in profiles. Load it in the shell's start-up file:

   bash:  source <(agentjail completion bash)    (needs the bash-completion package)
   zsh:   source <(agentjail completion zsh)     (after compinit)
   fish:  agentjail completion fish > ~/.config/fish/completions/agentjail.fish`

// complete answers a completion script (urfave/cli's
// --generate-shell-completion): after --profile, and for profiles show,
// the built-in profiles with their descriptions; after a "-", the flags;
// the subcommands of a command that has some; else nothing, so that the
// shell completes file and command names itself.
func complete(ctx context.Context, cmd *cli.Command) {
	args := cmd.Args().Slice()
	last := ""
	if len(args) > 0 {
		last = args[len(args)-1]
	}
	switch {
	case last == "--profile" || cmd.Name == "show" && len(args) == 0:
		l := launch.Loader(nil)
		for _, name := range l.BuiltinNames() {
			if p, err := l.Load(name); err == nil && p.Description != "" {
				name += ":" + p.Description
			}
			fmt.Fprintln(cmd.Root().Writer, name)
		}
	case strings.HasPrefix(last, "-") || len(cmd.Commands) > 0:
		cli.DefaultCompleteWithFlags(ctx, cmd)
	}
}

// appEnv is what every action writes to and reads from.
type appEnv struct {
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	code           *int
	caller         caller
}

// rawAfter returns the command line after the subcommand name, for
// commandArgs.
func (e appEnv) rawAfter(name string) []string {
	for i, a := range e.args[1:] {
		if a == name {
			return e.args[i+2:]
		}
	}
	return nil
}

// isUsage reports whether err is a command-line mistake.
func isUsage(err error) bool { return errors.Is(err, launch.ErrUsage) }

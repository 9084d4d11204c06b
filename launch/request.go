package launch

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/policy"
)

// Request is a run as the operator asked for it: the command line of
// `agentjail run` and `render`, as plain values. Nil durations and empty
// strings leave the profile's value.
type Request struct {
	Profile string // a built-in name or a file; "" is tier1
	User    string
	// Write, Read and Seccomp are paths as given: relative ones are from
	// the current directory.
	Write, Read, Seccomp []string
	Chdir                string
	// Env is K=V, or K alone for agentjail's own value of K.
	Env                         []string
	Timeout, IdleTimeout, Grace *time.Duration
	// Log, Record and Results are the operator's outputs ("" for none).
	Log, Record, Results string
	// ClaudeDir keeps Claude Code's sessions between runs (claude.dir).
	ClaudeDir string
	// TTY says whether the agent gets a terminal of its own (tty.go).
	TTY TTYMode
	// Typed: a person types at the run (its stdin is a terminal); Run
	// sets it. A run with a terminal of its own gets the profile's
	// interactive limits only then.
	Typed bool
	// AllowClipboard lets the agent's clipboard writes (OSC 52) reach the
	// operator's terminal.
	AllowClipboard bool
	Argv           []string
	// Net is network.mode (--net); AllowNet are more network.allow
	// entries (--allow-net), which imply proxy when Net is empty.
	Net      string
	AllowNet []string
	// APIKeyFile holds the Anthropic API key (--api-key-file): in a proxy
	// jail the broker's, never the jail's.
	APIKeyFile string
	// Quiet leaves only errors and the run's ending line on stderr:
	// warnings and degradations go to the record alone.
	Quiet bool
	// CallerRlimits are the resource limits of the process that asked for
	// the run when it is not this one's parent (agentjail-run, through
	// the launcher), by policy name: what bwrap would have inherited from
	// it. A limit the profile leaves unset is the caller's soft one, where
	// lower than this process's (callerRlimits); one the profile sets is
	// held to the caller's hard limit, as the exec stage holds it to an
	// inherited one.
	CallerRlimits map[string]CallerRlimit
}

// CallerRlimit is a soft and a hard limit.
type CallerRlimit struct{ Soft, Hard uint64 }

// Options vary the jail a Request gets; a run takes none.
type Options struct {
	// Dir is the start directory, instead of Chdir or the current one.
	Dir string
	// UserDir, when set, is the directory whose owner the run-user rule
	// looks at instead of the start directory's (doctor probes from / but
	// must probe the user a run from here would get).
	UserDir string
	// FreshProc tries a fresh /proc whatever the host's mount table says,
	// to hear the kernel's own verdict.
	FreshProc bool
	// NoAgentHomes leaves out the agents' private directories, which the
	// probes do not need: doctor then needs no writable state directory.
	NoAgentHomes bool
	// RunID replaces the fresh run id: render shows a placeholder where a
	// run's own id would be, so that its output depends only on the
	// command line and the host.
	RunID string
	// PlanOnly is for a plan that is only shown (render): its mask
	// placeholders are not held, and no registry entry is made for them.
	PlanOnly bool
	// Interrupt delivers the SIGINT and SIGTERM the caller catches: one
	// ends the loading of the profile, and a wait for an input file that
	// is a pipe (hostfs.ReadInput). Nil: they are caught meanwhile.
	Interrupt <-chan os.Signal
}

// ErrUsage is what every UsageError is: a mistake on the command line.
var ErrUsage = errors.New("usage")

// UsageError is a command-line mistake: exit 125, the message on stderr.
type UsageError string

func (e UsageError) Error() string { return string(e) }

// Is makes errors.Is(err, ErrUsage) hold.
func (e UsageError) Is(target error) bool { return target == ErrUsage }

// overlay turns a request into a policy layer on top of the profile, with
// each value's origin the flag that set it.
func overlay(req Request) (policy.Policy, error) {
	p := policy.Policy{User: req.User, Origins: policy.Origins{}}
	if p.User != "" {
		p.Origins["user"] = "--user"
	}
	// Paths on the command line are relative to the current directory, as
	// a shell user expects; only profiles must spell them absolute.
	list := func(flag, field string, from []string, dst *[]string) {
		for i, v := range from {
			p.Origins[fmt.Sprintf("%s[%d]", field, i)] = "--" + flag
			if abs, err := filepath.Abs(v); err == nil && v != "" && !strings.HasPrefix(v, "~") && !strings.HasPrefix(v, "${") {
				v = abs
			}
			*dst = append(*dst, v)
		}
	}
	if d := req.ClaudeDir; d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		p.Claude.Dir = d
		p.Origins["claude.dir"] = "--claude-dir"
	}
	list("write", "filesystem.write", req.Write, &p.Filesystem.Write)
	list("read", "filesystem.read", req.Read, &p.Filesystem.Read)
	list("seccomp", "seccomp.files", req.Seccomp, &p.Seccomp.Files)
	for i, a := range req.AllowNet {
		p.Network.Allow = append(p.Network.Allow, a)
		p.Origins[fmt.Sprintf("network.allow[%d]", i)] = "--allow-net"
	}
	switch {
	case req.Net != "":
		p.Network.Mode, p.Origins["network.mode"] = req.Net, "--net"
	case len(req.AllowNet) > 0:
		p.Network.Mode, p.Origins["network.mode"] = policy.NetProxy, "--allow-net"
	}
	for _, kv := range req.Env {
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
		from        *time.Duration
		dst         **policy.Duration
	}{
		{"timeout", "limits.wall", req.Timeout, &p.Limits.Wall},
		{"idle-timeout", "limits.idle", req.IdleTimeout, &p.Limits.Idle},
		{"grace", "limits.grace", req.Grace, &p.Limits.Grace},
	} {
		if f.from != nil {
			d := policy.Duration(*f.from)
			*f.dst = &d
			p.Origins[f.field] = "--" + f.flag
		}
	}
	return p, nil
}

// currentLimit is this process's limit of a resource, by policy name.
func currentLimit(name string) (CallerRlimit, bool) {
	r, ok := execstage.Resources[name]
	var l unix.Rlimit
	if !ok || unix.Getrlimit(r, &l) != nil {
		return CallerRlimit{}, false
	}
	return CallerRlimit{Soft: l.Cur, Hard: l.Max}, true
}

// callerRlimits returns the profile's rlimits with the caller's applied
// (Request.CallerRlimits); own gives this process's limit of a resource
// (false: unknown). A limit the profile leaves unset becomes the caller's
// soft one, as soft and hard, where either of the caller's is lower than
// this process's (stricter than bwrap inheriting it, never looser); nproc
// is left to the profile's pids fallback when unset.
func callerRlimits(set policy.Rlimits, caller map[string]CallerRlimit, own func(string) (CallerRlimit, bool)) policy.Rlimits {
	if len(caller) == 0 {
		return set
	}
	out := maps.Clone(set)
	if out == nil {
		out = policy.Rlimits{}
	}
	for name, c := range caller {
		if v, ok := set[name]; ok {
			out[name] = min(v, policy.Rlimit(c.Hard))
		} else if mine, ok := own(name); ok && name != "nproc" && (c.Soft < mine.Soft || c.Hard < mine.Hard) {
			out[name] = policy.Rlimit(c.Soft)
		}
	}
	return out
}

package execstage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/agentjail/agentjail/record"
)

// Path is where the stage's binary is bound inside the jail; bwrap's init
// runs it as the jail's command.
const Path = "/dev/.agentjail-exec"

// Binary is the small static stage agentjail installs beside itself
// (cmd/agentjail-exec). Where it is missing (agentjail built alone, `go
// install`), agentjail itself is bound at Path and acts as the stage,
// selected by the base name (IsStage).
const Binary = "agentjail-exec"

// IsStage reports whether a process started as argv0 is the stage.
func IsStage(argv0 string) bool { return filepath.Base(argv0) == filepath.Base(Path) }

// The descriptors a launch hands to bwrap, after 0, 1 and 2, in this
// order: the renderer names them on bwrap's command line, the supervisor
// passes them (ExtraFiles[fd-3]), bwrap and the stage read them.
const (
	FDStatus  = 3 // bwrap --json-status-fd: child-pid, exit-code
	FDReport  = 4 // the stage's report (Report lines); close-on-exec
	FDBlock   = 5 // bwrap --block-fd: the sandbox waits until the supervisor lets it go
	FDControl = 6 // the stage's control channel (control.go), when the plan needs one; closed otherwise
	FDSeccomp = 7 // the first --add-seccomp-fd; one per filter
)

// The stage's own flags, before `--` and the agent's command line.
const (
	FlagReport  = "--report-fd"  // its value is the report descriptor
	FlagControl = "--control-fd" // its value is the control channel (control.go)
	FlagListen  = "--listen"     // IP:PORT to listen on, handed back as a KindListener message; repeatable
	FlagPty     = "--pty"        // no value: the agent gets a terminal of its own, its master handed back as a KindPTY message
	FlagRlimit  = "--rlimit"     // NAME=VALUE, VALUE a decimal or "unlimited"; repeatable
)

// Args is the stage's command line after its name: where to report, the
// control channel, what to make for the supervisor, the rlimits to
// apply, and the agent's command.
type Args struct {
	Report  int // -1: none
	Control int // -1: none
	// Listen are addresses ("127.0.0.1:3128", "[::1]:3128") the stage
	// listens on in the jail's network namespace, before the agent
	// exists, and hands back over the control channel.
	Listen []string
	// Pty: the stage opens a pty in the jail's devpts, makes its slave the
	// controlling terminal of a new session and the agent's stdin, stdout
	// and stderr, and hands the master back (control.go, KindPTY).
	Pty     bool
	Rlimits []string
	Argv    []string
}

// Parse reads the stage's command line (what Words writes).
func Parse(words []string) (Args, error) {
	a := Args{Report: -1, Control: -1}
	for len(words) > 0 && words[0] != "--" {
		if words[0] == FlagPty {
			a.Pty, words = true, words[1:]
			continue
		}
		if len(words) < 2 {
			return a, fmt.Errorf("%s takes a value", words[0])
		}
		switch words[0] {
		case FlagReport, FlagControl:
			fd, err := strconv.Atoi(words[1])
			if err != nil || fd < 0 {
				return a, fmt.Errorf("%s %q: not a descriptor", words[0], words[1])
			}
			if words[0] == FlagReport {
				a.Report = fd
			} else {
				a.Control = fd
			}
		case FlagListen:
			a.Listen = append(a.Listen, words[1])
		case FlagRlimit:
			a.Rlimits = append(a.Rlimits, words[1])
		default:
			return a, fmt.Errorf("unexpected argument %q", words[0])
		}
		words = words[2:]
	}
	if len(a.Listen) > 0 && a.Control < 0 {
		return a, fmt.Errorf("%s needs %s", FlagListen, FlagControl)
	}
	if a.Pty && a.Control < 0 {
		return a, fmt.Errorf("%s needs %s", FlagPty, FlagControl)
	}
	if len(words) > 0 {
		a.Argv = words[1:]
	}
	return a, nil
}

// Words is the stage's command line for a, Path first: what bwrap runs.
func (a Args) Words() []string {
	w := []string{Path}
	if a.Report >= 0 {
		w = append(w, FlagReport, strconv.Itoa(a.Report))
	}
	if a.Control >= 0 {
		w = append(w, FlagControl, strconv.Itoa(a.Control))
	}
	if a.Pty {
		w = append(w, FlagPty)
	}
	for _, addr := range a.Listen {
		w = append(w, FlagListen, addr)
	}
	for _, kv := range a.Rlimits {
		w = append(w, FlagRlimit, kv)
	}
	return append(append(w, "--"), a.Argv...)
}

// Report is one line the stage writes on its report descriptor, as JSON:
// an rlimit it applied, an exec failure, or a failure of its own. EOF
// after the rlimit lines (the descriptor is close-on-exec) means the exec
// succeeded: runc's pattern.
type Report struct {
	Rlimit  string `json:"rlimit,omitempty"`
	Asked   string `json:"asked,omitempty"`
	Applied string `json:"applied,omitempty"`
	*record.ExecFailure
	Error string `json:"error,omitempty"`
}

// Result is what a whole report says.
type Result struct {
	// Rlimits are the limits applied, in order; Applied differs from
	// Asked where the stage could not raise a hard limit.
	Rlimits []Report
	// ExecFailure is set when the agent could not be executed (126/127).
	ExecFailure *record.ExecFailure
	// Err is the stage's own failure (a bad command line, close_range).
	Err error
}

// ReadReport reads what the stage wrote on its report descriptor.
func ReadReport(data []byte) Result {
	var res Result
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var r Report
		if dec.Decode(&r) != nil {
			return res
		}
		switch {
		case r.Rlimit != "":
			res.Rlimits = append(res.Rlimits, r)
		case r.ExecFailure != nil:
			res.ExecFailure = r.ExecFailure
		case r.Error != "":
			res.Err = errors.New(r.Error)
		}
	}
}

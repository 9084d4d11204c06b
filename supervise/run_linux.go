package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// Reasons a run ends with; the run record's `reason`.
const (
	ReasonExit        = "exit"
	ReasonSignal      = "signal"
	ReasonExecFailed  = "exec_failed"
	ReasonSetupFailed = "setup_failed"
)

// ExitSetup is agentjail's own failure: bad policy, bwrap missing, a jail
// that could not be set up.
const ExitSetup = 125

// Spec is one launch of bwrap.
type Spec struct {
	Bwrap string
	Args  []string // bwrap's argv after argv[0] (mounts.Plan.Args)
	Env   []string // the jail's environment, given to bwrap as its own
	// Cred, when set, is the run user bwrap is started as.
	Cred   *syscall.Credential
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Seccomp are compiled filters, passed from fd mounts.FDSeccomp on.
	Seccomp []*os.File
}

// Result is how a run ended.
type Result struct {
	Reason string
	// ExitCode is agentjail's exit code for this run.
	ExitCode int
	// AgentExit is the agent's own exit status as bwrap reported it
	// (128+n for death by signal n); nil when the agent never ran.
	AgentExit *int
	// ChildPID is the sandbox's pid (bwrap's init) in agentjail's namespace.
	ChildPID int
	// Exec is set when the agent could not be executed.
	Exec *ExecFailure
}

// status is one line of bwrap's --json-status-fd.
type status struct {
	ChildPID *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// Run starts bwrap and waits for it.
func Run(spec Spec) (Result, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	defer statusR.Close()
	reportR, reportW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return Result{}, err
	}
	defer reportR.Close()

	cmd := exec.Command(spec.Bwrap, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.ExtraFiles = append([]*os.File{statusW, reportW}, spec.Seccomp...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: spec.Cred, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	statusW.Close()
	reportW.Close()
	if err != nil {
		return Result{Reason: ReasonSetupFailed, ExitCode: ExitSetup}, fmt.Errorf("start %s: %w", spec.Bwrap, err)
	}

	var st status
	var res Result
	dec := json.NewDecoder(statusR)
	for {
		var line status
		if dec.Decode(&line) != nil {
			break
		}
		if line.ChildPID != nil {
			res.ChildPID = *line.ChildPID
		}
		if line.ExitCode != nil {
			st.ExitCode = line.ExitCode
		}
	}
	report, _ := io.ReadAll(reportR)
	waitErr := cmd.Wait()

	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return Result{Reason: ReasonSetupFailed, ExitCode: ExitSetup}, waitErr
	}
	if len(report) > 0 {
		var f ExecFailure
		if json.Unmarshal(report, &f) == nil {
			return Result{Reason: ReasonExecFailed, ExitCode: f.ExitCode(), ChildPID: res.ChildPID, Exec: &f}, nil
		}
	}
	if st.ExitCode != nil {
		code := *st.ExitCode
		res.AgentExit = &code
		res.ExitCode = code
		res.Reason = ReasonExit
		if code > 128 {
			// bwrap's init reports death by signal n as 128+n; `exit 143`
			// looks the same through it.
			res.Reason = ReasonSignal
		}
		return res, nil
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Reason = ReasonSignal
		res.ExitCode = 128 + int(ws.Signal())
		return res, nil
	}
	res.Reason = ReasonSetupFailed
	res.ExitCode = ExitSetup
	return res, fmt.Errorf("bubblewrap could not set up the jail (exit %d); its message is above", cmd.ProcessState.ExitCode())
}

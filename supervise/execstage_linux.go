package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExecStageName is the base name under which the agentjail binary runs as
// the exec stage (mounts.ExecStagePath ends in it).
const ExecStageName = ".agentjail-exec"

// IsExecStage reports whether this process was started as the exec stage.
func IsExecStage(argv0 string) bool { return filepath.Base(argv0) == ExecStageName }

// ExecFailure is what the exec stage reports when the agent cannot start.
type ExecFailure struct {
	Path  string `json:"path"`
	Errno int    `json:"errno"`
}

func (e *ExecFailure) Error() string {
	return fmt.Sprintf("cannot execute %s inside the jail: %s", e.Path, syscall.Errno(e.Errno).Error())
}

// ExitCode is 127 when the command was not found, 126 when it was found but
// could not be executed, as in POSIX shells.
func (e *ExecFailure) ExitCode() int {
	if syscall.Errno(e.Errno) == syscall.ENOENT {
		return 127
	}
	return 126
}

// stageReport is one line the exec stage writes to its report fd: an
// rlimit it applied, an ExecFailure, or a failure of its own.
type stageReport struct {
	Rlimit  string `json:"rlimit,omitempty"`
	Asked   string `json:"asked,omitempty"`
	Applied string `json:"applied,omitempty"`
	*ExecFailure
	Error string `json:"error,omitempty"`
}

// ExecStage is the last step inside the jail, run by bwrap's init as
// `.agentjail-exec [--report-fd N] [--rlimit NAME=VALUE]... -- CMD ARG...`:
// it sets each rlimit on itself (soft = hard = VALUE, so that every process
// of the agent's inherits it and none can raise it), closes every inherited
// descriptor but 0, 1 and 2, looks CMD up on the jail's PATH and execs it.
// Each rlimit is reported on the report fd; if the exec fails it writes an
// ExecFailure there and returns 126 or 127. The report fd is close-on-exec,
// so EOF after the rlimit lines tells the supervisor the exec succeeded
// (runc's pattern). It returns only on failure.
func ExecStage(args []string) int {
	report := -1
	var rlimits []string
	for len(args) > 0 && args[0] != "--" {
		switch {
		case args[0] == "--report-fd" && len(args) > 1:
			report, _ = strconv.Atoi(args[1])
		case args[0] == "--rlimit" && len(args) > 1:
			rlimits = append(rlimits, args[1])
		default:
			fmt.Fprintf(os.Stderr, "agentjail exec stage: unexpected argument %q\n", args[0])
			return 125
		}
		args = args[2:]
	}
	send := func(r stageReport) {
		if report >= 0 {
			data, _ := json.Marshal(r)
			unix.Write(report, append(data, '\n'))
		}
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(os.Stderr, "agentjail: %s\n", msg)
		send(stageReport{Error: msg})
		return 125
	}
	if len(args) < 2 {
		return fail("exec stage: no command")
	}
	argv := args[1:]
	for _, kv := range rlimits {
		r, err := setRlimit(kv)
		if err != nil {
			return fail("exec stage: %v", err)
		}
		send(r)
	}
	// Everything above stderr closes at exec: inherited descriptors never
	// reach the agent, and the report fd's closing tells the supervisor the
	// exec succeeded.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("exec stage: close_range: %v", err)
	}
	f := execvp(argv)
	fmt.Fprintf(os.Stderr, "agentjail: %v\n", f)
	send(stageReport{ExecFailure: f})
	return f.ExitCode()
}

// setRlimit applies NAME=VALUE to this process. A value above the hard
// limit it inherited cannot be had without CAP_SYS_RESOURCE, which the run
// user lacks: the hard limit is applied instead, and the report says so.
func setRlimit(kv string) (stageReport, error) {
	name, val, _ := strings.Cut(kv, "=")
	res, ok := rlimitResources[name]
	if !ok {
		return stageReport{}, fmt.Errorf("unknown rlimit %q", name)
	}
	want := uint64(math.MaxUint64)
	if val != "unlimited" {
		var err error
		if want, err = strconv.ParseUint(val, 10, 64); err != nil {
			return stageReport{}, fmt.Errorf("rlimit %s: bad value %q", name, val)
		}
	}
	lim := unix.Rlimit{Cur: want, Max: want}
	err := unix.Setrlimit(res, &lim)
	if errors.Is(err, unix.EPERM) {
		var old unix.Rlimit
		if err = unix.Getrlimit(res, &old); err == nil {
			lim = unix.Rlimit{Cur: min(want, old.Max), Max: min(want, old.Max)}
			err = unix.Setrlimit(res, &lim)
		}
	}
	if err != nil {
		return stageReport{}, fmt.Errorf("setrlimit %s=%s: %w", name, val, err)
	}
	return stageReport{Rlimit: name, Asked: val, Applied: rlimitString(lim.Max)}, nil
}

// execvp runs argv like execvp(3): a name with a slash is executed as is,
// otherwise each $PATH directory is tried; EACCES from any of them wins over
// ENOENT. It returns only on failure.
func execvp(argv []string) *ExecFailure {
	env := os.Environ()
	if strings.Contains(argv[0], "/") {
		err := syscall.Exec(argv[0], argv, env)
		return &ExecFailure{Path: argv[0], Errno: int(errnoOf(err))}
	}
	fail := &ExecFailure{Path: argv[0], Errno: int(syscall.ENOENT)}
	pathEnv, ok := os.LookupEnv("PATH")
	if !ok {
		pathEnv = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, argv[0])
		errno := errnoOf(syscall.Exec(p, argv, env))
		if errno == syscall.EACCES {
			// An unsearchable $PATH directory also answers EACCES; only a
			// file that is there but cannot be executed makes a 126.
			if _, err := os.Stat(p); err != nil {
				continue
			}
		}
		if errno != syscall.ENOENT && errno != syscall.ENOTDIR {
			fail = &ExecFailure{Path: p, Errno: int(errno)}
		}
	}
	return fail
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	if errors.Is(err, os.ErrPermission) {
		return syscall.EACCES
	}
	return syscall.ENOENT
}

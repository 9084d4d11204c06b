package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
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

// ExecStage is the last step inside the jail, run by bwrap's init as
// `.agentjail-exec [--report-fd N] -- CMD ARG...`: it closes every
// inherited descriptor but 0, 1 and 2, looks CMD up on the jail's PATH and
// execs it. If that fails it writes an ExecFailure to the report fd and
// returns 126 or 127; the report fd is close-on-exec, so the supervisor
// reading EOF with no data knows the exec succeeded (runc's pattern). It
// returns only on failure.
func ExecStage(args []string) int {
	report := -1
	for len(args) > 0 && args[0] != "--" {
		if args[0] == "--report-fd" && len(args) > 1 {
			report, _ = strconv.Atoi(args[1])
			args = args[2:]
			continue
		}
		fmt.Fprintf(os.Stderr, "agentjail exec stage: unexpected argument %q\n", args[0])
		return 125
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "agentjail exec stage: no command")
		return 125
	}
	argv := args[1:]
	// Everything above stderr closes at exec: inherited descriptors never
	// reach the agent, and the report fd's closing tells the supervisor the
	// exec succeeded.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "agentjail exec stage: close_range: %v\n", err)
		return 125
	}
	f := execvp(argv)
	fmt.Fprintf(os.Stderr, "agentjail: %v\n", f)
	if report >= 0 {
		data, _ := json.Marshal(f)
		unix.Write(report, data)
	}
	return f.ExitCode()
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

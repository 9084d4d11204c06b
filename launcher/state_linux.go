package launcher

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The process state a request brings, and the worker's own to go back to:
// resource limits, working directory, environment, umask, and descriptors
// 0, 1 and 2 with os.Stdin, os.Stdout and os.Stderr over them.

// base is the worker's own state, taken before its first client.
type base struct {
	limits map[int]unix.Rlimit
	cwd    int // O_PATH
	env    []string
	umask  int
	std    [3]int // copies of the worker's own 0, 1 and 2
}

// rlimNLimits is how many resource limits Linux has (RLIM_NLIMITS).
const rlimNLimits = 16

// pinned keeps every *os.File that os.Stdin, os.Stdout and os.Stderr were
// before they were made anew: collected, its finalizer would close
// whatever descriptor now has its number.
var pinned []*os.File

func snapshot() (*base, error) {
	b := &base{limits: map[int]unix.Rlimit{}, env: os.Environ()}
	for r := range rlimNLimits {
		var l unix.Rlimit
		if err := unix.Getrlimit(r, &l); err == nil {
			b.limits[r] = l
		}
	}
	b.umask = unix.Umask(0)
	unix.Umask(b.umask)
	var err error
	if b.cwd, err = unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("the worker's working directory: %w", err)
	}
	for i := range b.std {
		if b.std[i], err = unix.FcntlInt(uintptr(i), unix.F_DUPFD_CLOEXEC, 3); err != nil {
			return nil, fmt.Errorf("the worker's descriptor %d: %w", i, err)
		}
	}
	return b, nil
}

// adopt makes a request's state this process's own: what `agentjail run`
// started by the client would have had.
func adopt(req Request, fds []int) error {
	for _, l := range req.Limits {
		lim := syscall.Rlimit{Cur: l.Cur, Max: l.Max}
		// syscall's, not unix's: for RLIMIT_NOFILE it also tells os/exec
		// that children get this limit as it is.
		if err := syscall.Setrlimit(l.Resource, &lim); err != nil {
			return fmt.Errorf("the client's resource limit %d (%d, %d): %w; start the launcher with limits no lower than its callers'", l.Resource, l.Cur, l.Max, err)
		}
	}
	if err := unix.Fchdir(fds[3]); err != nil {
		return fmt.Errorf("the client's working directory: %w", err)
	}
	setEnv(req.Env)
	unix.Umask(int(req.Umask))
	return setStd(fds[:3])
}

// release goes back to the worker's own state, with none of the client's
// descriptors left open here (a pipe's reader waits for every writer).
// It fails when a resource limit cannot be raised again (a hard limit
// lowered without CAP_SYS_RESOURCE): the worker then exits.
func (b *base) release() error {
	err := setStd(b.std[:])
	if ferr := unix.Fchdir(b.cwd); ferr != nil {
		err = errors.Join(err, fmt.Errorf("the worker's working directory: %w", ferr))
	}
	setEnv(b.env)
	unix.Umask(b.umask)
	for r, l := range b.limits {
		lim := syscall.Rlimit{Cur: l.Cur, Max: l.Max}
		if lerr := syscall.Setrlimit(r, &lim); lerr != nil {
			err = errors.Join(err, fmt.Errorf("resource limit %d back to (%d, %d): %w", r, l.Cur, l.Max, lerr))
		}
	}
	return err
}

func setEnv(env []string) {
	os.Clearenv()
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
}

// setStd puts fds at 0, 1 and 2, and makes os.Stdin, os.Stdout and
// os.Stderr anew over them, as Go makes them at a program's start (a
// non-blocking descriptor is then read through the poller).
func setStd(fds []int) error {
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fmt.Errorf("descriptor %d: %w", i, err)
		}
	}
	pinned = append(pinned, os.Stdin, os.Stdout, os.Stderr)
	os.Stdin = os.NewFile(0, "/dev/stdin")
	os.Stdout = os.NewFile(1, "/dev/stdout")
	os.Stderr = os.NewFile(2, "/dev/stderr")
	return nil
}

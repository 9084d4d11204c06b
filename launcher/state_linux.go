package launcher

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The process state a request brings, and the worker's own to go back to:
// working directory, environment, umask, and descriptors 0, 1 and 2 with
// os.Stdin, os.Stdout and os.Stderr over them. The client's resource
// limits are not among them: set on the worker they would count its whole
// life (RLIMIT_CPU) and bound agentjail itself; Work hands them to the run,
// for the jail.

// base is the worker's own state, taken before its first client.
type base struct {
	cwd   int // O_PATH
	env   []string
	umask int
	std   [3]int // copies of the worker's own 0, 1 and 2
}

// pinned keeps every *os.File that os.Stdin, os.Stdout and os.Stderr were
// before they were made anew: collected, its finalizer would close
// whatever descriptor now has its number.
var pinned []*os.File

func snapshot() (*base, error) {
	b := &base{env: os.Environ()}
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
	if err := unix.Fchdir(fds[3]); err != nil {
		return fmt.Errorf("the client's working directory: %w", err)
	}
	setEnv(req.Env)
	unix.Umask(int(req.Umask))
	return setStd(fds[:3])
}

// release goes back to the worker's own state, with none of the client's
// descriptors left open here (a pipe's reader waits for every writer).
func (b *base) release() error {
	err := setStd(b.std[:])
	if ferr := unix.Fchdir(b.cwd); ferr != nil {
		err = errors.Join(err, fmt.Errorf("the worker's working directory: %w", ferr))
	}
	setEnv(b.env)
	unix.Umask(b.umask)
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

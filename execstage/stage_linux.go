package execstage

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/agentjail/agentjail/record"
	"golang.org/x/sys/unix"
)

// jail inherits. The exec stage takes it out before the agent sees it.
const NprocVar = "AGENTJAIL_NPROC"

// Main is the last step inside the jail, run by bwrap's init as
// `/dev/.agentjail-exec [--report-fd N] [--control-fd N] [--pty] [--listen IP:PORT]...
// [--rlimit NAME=VALUE]... -- CMD ARG...` (Parse): it gives the agent a
// terminal of its own (openPty), makes each listener
// and sends it over the control channel (listen), sets each rlimit on itself (soft = hard = VALUE, so that every process
// of the agent's inherits it and none can raise it), closes every inherited
// descriptor but 0, 1 and 2, looks CMD up on the jail's PATH and execs it.
// Each rlimit is reported on the report fd; if the exec fails it writes an
// ExecFailure there and returns 126 or 127. The report fd is close-on-exec,
// so EOF after the rlimit lines tells the supervisor the exec succeeded
// (runc's pattern). It returns only on failure.
func Main(words []string) int {
	a, err := Parse(words)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentjail exec stage: %v\n", err)
		return record.ExitSetup
	}
	report, rlimits, argv := a.Report, a.Rlimits, a.Argv
	send := func(r Report) {
		if report >= 0 {
			data, _ := json.Marshal(r)
			unix.Write(report, append(data, '\n'))
		}
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(os.Stderr, "agentjail: %s\n", msg)
		send(Report{Error: msg})
		return record.ExitSetup
	}
	if len(argv) == 0 {
		return fail("exec stage: no command")
	}
	if a.Pty {
		if err := openPty(a.Control); err != nil {
			return fail("exec stage: %v", err)
		}
	}
	for _, addr := range a.Listen {
		if err := listen(a.Control, addr); err != nil {
			return fail("exec stage: %v", err)
		}
	}
	if v, ok := os.LookupEnv(NprocVar); ok {
		os.Unsetenv(NprocVar)
		if !slices.ContainsFunc(rlimits, func(kv string) bool { return strings.HasPrefix(kv, "nproc=") }) {
			rlimits = append(rlimits, "nproc="+v)
		}
	}
	var limits []rlimit
	for _, kv := range rlimits {
		l, r, err := prepareRlimit(kv)
		if err != nil {
			return fail("exec stage: %v", err)
		}
		send(r)
		limits = append(limits, l)
	}
	// Everything above stderr closes at exec: inherited descriptors never
	// reach the agent, and the report fd's closing tells the supervisor the
	// exec succeeded.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("exec stage: close_range: %v", err)
	}
	x, err := prepareExec(argv, os.Environ())
	if err != nil {
		return fail("exec stage: %v", err)
	}
	return (&record.ExecFailure{Errno: int(x.run(limits, report))}).ExitCode()
}

// rlimit is one limit, checked and ready to be set.
type rlimit struct {
	resource int
	value    unix.Rlimit
}

// prepareRlimit parses NAME=VALUE and makes sure it can be set later
// without fail: a value above the hard limit this process inherited needs
// CAP_SYS_RESOURCE, which the run user lacks, so the hard limit is applied
// instead, and the report says so. Nothing is lowered yet (see run).
func prepareRlimit(kv string) (rlimit, Report, error) {
	name, val, _ := strings.Cut(kv, "=")
	res, ok := Resources[name]
	if !ok {
		return rlimit{}, Report{}, fmt.Errorf("unknown rlimit %q", name)
	}
	want := uint64(math.MaxUint64)
	if val != "unlimited" {
		var err error
		if want, err = strconv.ParseUint(val, 10, 64); err != nil {
			return rlimit{}, Report{}, fmt.Errorf("rlimit %s: bad value %q", name, val)
		}
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(res, &old); err != nil {
		return rlimit{}, Report{}, fmt.Errorf("getrlimit %s: %w", name, err)
	}
	applied := want
	if want > old.Max {
		// Raising the hard limit alone leaves this process as it was.
		err := unix.Setrlimit(res, &unix.Rlimit{Cur: old.Cur, Max: want})
		switch {
		case errors.Is(err, unix.EPERM):
			applied = old.Max
		case err != nil:
			return rlimit{}, Report{}, fmt.Errorf("setrlimit %s=%s: %w", name, val, err)
		}
	}
	return rlimit{res, unix.Rlimit{Cur: applied, Max: applied}},
		Report{Rlimit: name, Asked: val, Applied: rlimitString(applied)}, nil
}

// execAttempt is one path execve is tried with, and what the exec stage
// reports if it is the one that failed.
type execAttempt struct {
	path  *byte
	json  []byte // {"path":P,"errno":
	human []byte // agentjail: cannot execute P inside the jail:
}

// preparedExec is an exec made ready before the rlimits are lowered: every
// C string built, every message but the errno written, a buffer for the
// report. The Go runtime maps memory as it allocates, and an address-space
// or data limit below what it has mapped already (any `as` worth setting,
// since it reserves its heap arenas up front) would make the next mapping
// fail and the runtime abort: between the limits and execve nothing
// allocates.
type preparedExec struct {
	argv, envv []*byte
	slash      bool // argv[0] holds a slash: executed as is, no $PATH search
	attempts   []execAttempt
	notFound   execAttempt // argv[0] when no attempt found anything
	buf        []byte
	st         unix.Stat_t
	cwd        int // AT_FDCWD, as a variable: a negative constant is no uintptr
}

// prepareExec is execvp(3)'s preparation: a name with a slash is executed
// as is, otherwise each $PATH directory is tried.
func prepareExec(argv, env []string) (*preparedExec, error) {
	x := &preparedExec{slash: strings.Contains(argv[0], "/"), cwd: unix.AT_FDCWD}
	var err error
	if x.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return nil, err
	}
	if x.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return nil, err
	}
	paths := []string{argv[0]}
	if !x.slash {
		paths = nil
		pathEnv, ok := os.LookupEnv("PATH")
		if !ok {
			pathEnv = "/usr/local/bin:/usr/bin:/bin"
		}
		for _, dir := range filepath.SplitList(pathEnv) {
			if dir == "" {
				dir = "."
			}
			paths = append(paths, filepath.Join(dir, argv[0]))
		}
	}
	attempt := func(p string) (execAttempt, error) {
		quoted, _ := json.Marshal(p)
		a := execAttempt{
			json:  fmt.Appendf(nil, `{"path":%s,"errno":`, quoted),
			human: fmt.Appendf(nil, "agentjail: cannot execute %s inside the jail: ", p),
		}
		var err error
		a.path, err = syscall.BytePtrFromString(p)
		x.buf = make([]byte, 0, max(cap(x.buf), len(a.json)+len(a.human)+128))
		return a, err
	}
	for _, p := range paths {
		a, err := attempt(p)
		if err != nil {
			return nil, err
		}
		x.attempts = append(x.attempts, a)
	}
	if x.notFound, err = attempt(argv[0]); err != nil {
		return nil, err
	}
	return x, nil
}

// run sets the limits and execs, with raw system calls only; it returns
// only on failure, reported on the report fd (-1: none) and stderr. EACCES
// from any attempt wins over ENOENT, as in execvp(3).
//
// Nor may the goroutine's stack grow (a new stack is a new mapping, as
// measured: the runtime aborted in morestack), so it is grown first; with
// the garbage collector off it is never shrunk. One P and nothing that
// blocks in the scheduler: the runtime starts no thread while execve runs
// (what syscall.Exec's runtime_BeforeExec lock is for, go.dev/issue/19546).
// The original soft RLIMIT_NOFILE, which the Go runtime raised at start and
// syscall.Exec would restore, is not restored: every profile sets nofile
// (profiles/_base.yaml).
func (x *preparedExec) run(limits []rlimit, report int) syscall.Errno {
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(1)
	growStack()
	for i := range limits {
		unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(limits[i].resource), uintptr(unsafe.Pointer(&limits[i].value)), 0, 0, 0)
	}
	failed, errno := &x.notFound, syscall.ENOENT
	for i := range x.attempts {
		a := &x.attempts[i]
		_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(a.path)),
			uintptr(unsafe.Pointer(&x.argv[0])), uintptr(unsafe.Pointer(&x.envv[0])))
		if x.slash {
			failed, errno = a, e
			break
		}
		if e == syscall.EACCES {
			// An unsearchable $PATH directory also answers EACCES; only a
			// file that is there but cannot be executed makes a 126.
			if _, _, serr := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(x.cwd), uintptr(unsafe.Pointer(a.path)),
				uintptr(unsafe.Pointer(&x.st)), 0, 0, 0); serr != 0 {
				continue
			}
		}
		if e != syscall.ENOENT && e != syscall.ENOTDIR {
			failed, errno = a, e
		}
	}
	// Within the buffer's capacity: no allocation.
	b := strconv.AppendInt(append(x.buf[:0], failed.json...), int64(errno), 10)
	b = append(b, "}\n"...)
	if report >= 0 {
		unix.RawSyscall(unix.SYS_WRITE, uintptr(report), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	b = append(append(append(x.buf[:0], failed.human...), errno.Error()...), '\n')
	unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return errno
}

// growStack makes the goroutine's stack at least 64 KiB deep.
//
//go:noinline
func growStack() byte {
	var pad [64 << 10]byte
	pad[len(pad)-1] = 1
	return pad[len(pad)-1]
}

// Command probe makes the system calls the seccomp kernel tests ask for and
// prints one NAME=RESULT line each: "ok", an errno name (EPERM, EBADF), or
// for int80 the value returned. It is built by the integration tests.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func raw(nr, a0, a1, a2 uintptr) string {
	_, _, e := unix.Syscall(nr, a0, a1, a2)
	if e != 0 {
		return errnoName(e)
	}
	return "ok"
}

const badFD = ^uintptr(0) // fd -1: the kernel answers EBADF once the filter lets the call through

func main() {
	for _, what := range os.Args[1:] {
		var res string
		switch what {
		case "ptrace":
			// PTRACE_SEIZE a child of our own: allowed without privilege,
			// and it does not stop the tracee.
			runtime.LockOSThread()
			child := exec.Command("/bin/sleep", "60")
			if err := child.Start(); err != nil {
				res = err.Error()
				break
			}
			res = raw(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(child.Process.Pid), 0)
			child.Process.Kill()
			child.Wait()
		case "keyctl":
			res = raw(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, keyring(), 0)
		case "tiocsti":
			res = raw(unix.SYS_IOCTL, badFD, unix.TIOCSTI, 0)
		case "tiocsti-high": // CVE-2019-10063: the kernel truncates the request to 32 bits
			res = raw(unix.SYS_IOCTL, badFD, 0x123<<32|unix.TIOCSTI, 0)
		case "tioclinux":
			res = raw(unix.SYS_IOCTL, badFD, unix.TIOCLINUX, 0)
		case "tcgets":
			res = raw(unix.SYS_IOCTL, badFD, unix.TCGETS, 0)
		case "io_uring":
			var params [120]byte
			fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafePointer(&params)), 0)
			res = errnoName(nil)
			if e != 0 {
				res = errnoName(e)
			} else {
				unix.Close(int(fd))
			}
		case "int80":
			res = fmt.Sprint(int80Getpid())
		default:
			fmt.Fprintf(os.Stderr, "probe: unknown %q\n", what)
			os.Exit(2)
		}
		fmt.Printf("%s=%s\n", what, res)
	}
}

func keyring() uintptr {
	id := int32(unix.KEY_SPEC_USER_KEYRING) // negative: sign-extend
	return uintptr(id)
}

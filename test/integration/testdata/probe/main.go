// Command probe makes the system calls the seccomp kernel tests ask for and
// prints one NAME=RESULT line each: "ok", an errno name (EPERM, EBADF), or
// for int80 the value returned. It is built by the integration tests.
//
// The runtime must not keep its cgroup files open (Go 1.25's
// container-aware GOMAXPROCS does), or "fds" would list them.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

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
	if len(os.Args) > 3 && os.Args[1] == "rusage" {
		os.Exit(rusage(os.Args[2], os.Args[3:]))
	}
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
			res = int80()
		case "inject", "inject-high":
			// Type a line into the terminal on fd 0, as a user would.
			req := uintptr(unix.TIOCSTI)
			if what == "inject-high" {
				req |= 0x123 << 32 // CVE-2019-10063
			}
			for _, c := range []byte("echo INJECTED\n") {
				if res = raw(unix.SYS_IOCTL, 0, req, uintptr(unsafePointer(&c))); res != "ok" {
					break
				}
			}
		case "tiocsetd-fd0":
			// Set fd 0's line discipline to N_TTY, the one it has: a no-op
			// where the call is allowed, loading no module.
			ldisc := int32(0) // N_TTY
			res = raw(unix.SYS_IOCTL, 0, unix.TIOCSETD, uintptr(unsafePointer(&ldisc)))
		case "tioclinux-fd0":
			sub := byte(6) // TIOCL_GETSHIFTSTATE: harmless where it works
			res = raw(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafePointer(&sub)))
		case "x32":
			// getpid through the x32 ABI (__X32_SYSCALL_BIT): ENOSYS where
			// x32 is not built in, as here.
			res = raw(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		case "fds":
			res = openFDs()
		case "mounts":
			mounts()
			continue
		case "fsopen":
			res = fdResult(unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC))
		case "open_tree":
			res = fdResult(unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE))
		case "fspick":
			res = fdResult(unix.Fspick(unix.AT_FDCWD, "/", unix.FSPICK_CLOEXEC))
		case "fsmount":
			res = fdResult(unix.Fsmount(-1, 0, 0))
		case "move_mount":
			res = errnoName(unix.MoveMount(-1, "", -1, "", 0))
		case "mount_setattr":
			res = errnoName(unix.MountSetattr(-1, "", 0, &unix.MountAttr{}))
		default:
			if p, ok := strings.CutPrefix(what, "openat2-setuid="); ok {
				// openat2 passes its mode in memory, where seccomp cannot
				// look: what the filter cannot refuse, the run's end strips.
				what, res = "openat2-setuid", fdResult(unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o4755}))
				break
			}
			fmt.Fprintf(os.Stderr, "probe: unknown %q\n", what)
			os.Exit(2)
		}
		fmt.Printf("%s=%s\n", what, res)
	}
}

func fdResult(fd int, err error) string {
	if err == nil {
		unix.Close(fd)
	}
	return errnoName(err)
}

// openFDs lists the open descriptors but the one reading the list,
// through raw system calls: os.Open would start Go's poller, whose own
// descriptors (epoll, eventfd) would show in the list.
func openFDs() string {
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoName(err)
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	var out []string
	for _, n := range names {
		if n != strconv.Itoa(fd) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	return strings.Join(out, ",")
}

// mounts prints one line per mount point that is a directory, as the
// jail sees it: "mount=PATH MAGIC ro|rw BYTES" from statfs(2) on the path,
// which answers for the mount on top, whatever lies beneath.
func mounts() {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Printf("mounts=%v\n", err)
		return
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || seen[f[4]] {
			continue
		}
		p := unescape(f[4])
		seen[f[4]] = true
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		var fs unix.Statfs_t
		if unix.Statfs(p, &fs) != nil {
			continue
		}
		mode := "rw"
		if fs.Flags&unix.ST_RDONLY != 0 {
			mode = "ro"
		}
		fmt.Printf("mount=%s %#x %s %d\n", p, fs.Type, mode, uint64(fs.Blocks)*uint64(fs.Bsize))
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func keyring() uintptr {
	id := int32(unix.KEY_SPEC_USER_KEYRING) // negative: sign-extend
	return uintptr(id)
}

// int80 is getpid through int 0x80, or "SIGSEGV" where the kernel has no
// IA32 emulation and answers the instruction with a fault.
func int80() (res string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			res = "SIGSEGV"
		}
	}()
	return fmt.Sprint(int80Getpid())
}

// rusage runs argv with this process's stdio and descriptor 3, writes its
// peak resident set size (bytes) to the file out, and returns its exit
// code. A process started by a large one (a Go test binary, with vfork)
// is charged the starter's peak at exec (fs/exec.c keeps the old mm's
// hiwater_rss); started from this small probe, the figure is argv's own.
func rusage(out string, argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if fd3 := os.NewFile(3, "fd3"); fd3 != nil {
		if _, err := fd3.Stat(); err == nil {
			cmd.ExtraFiles = []*os.File{fd3}
		}
	}
	cmd.Run()
	if cmd.ProcessState == nil {
		return 127
	}
	maxrss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	os.WriteFile(out, []byte(strconv.FormatInt(maxrss, 10)), 0o644)
	return cmd.ProcessState.ExitCode()
}

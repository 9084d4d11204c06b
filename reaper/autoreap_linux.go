package reaper

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watch waits, in autoreap mode, for a started child to exit and hands
// its status to its waiter. The pidfd polls readable once the child has
// exited (pidfd_open(2)); the kernel releases it right after, in the same
// exit, and only then is the status on the pidfd — hence the short retry.
func watch(c *child) {
	p := []unix.PollFd{{Fd: int32(c.pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(p, -1); err != unix.EINTR {
			break // only EINTR can happen to a valid descriptor
		}
	}
	for pause := 10 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		if ws, ok := exitStatus(c.pidfd); ok {
			mu.Lock()
			c.reaped = true
			mu.Unlock()
			c.status <- ws // buffered: never blocks
			return
		}
		time.Sleep(pause)
	}
}

// exitStatus returns the wait status a pidfd keeps of its process once it
// has been released (PIDFD_INFO_EXIT); ok is false while it has not.
func exitStatus(pidfd int) (ws syscall.WaitStatus, ok bool) {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	if err := unix.IoctlPidfdInfo(pidfd, &info); err != nil || info.Mask&unix.PIDFD_INFO_EXIT == 0 {
		return 0, false
	}
	return syscall.WaitStatus(info.Exit_code), true
}

// KernelReaps reports whether BeginAutoreap would have the kernel reap on
// this machine (for agentjail doctor).
func KernelReaps() bool { return kernelKeepsExitStatus() }

// kernelKeepsExitStatus reports whether a pidfd still gives the status of
// its process after the kernel released it (PIDFD_INFO_EXIT, Linux 6.15),
// which autoreap needs: without it, a child released at exit takes its
// status along. Asked of one of our own threads, which ends: a thread
// pidfd (PIDFD_THREAD, Linux 6.9) polls readable when its thread has
// exited. No process is started. Any failure — an older kernel, a seccomp
// profile denying pidfd_open or the ioctl — answers no.
func kernelKeepsExitStatus() bool {
	fds := make(chan int, 1)
	go endThread(fds)
	return keptAtExit(<-fds)
}

// keptAtExit reports whether fd, a pidfd of a thread that is ending (-1:
// none), gives the thread's status once the thread is gone; it closes fd.
func keptAtExit(fd int) bool {
	if fd < 0 {
		return false
	}
	defer unix.Close(fd)
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 1000)
		if err == unix.EINTR {
			continue
		}
		if n != 1 {
			return false
		}
		break
	}
	// The thread may be preempted between polling readable and its
	// release (a loaded or CPU-throttled machine): wait up to a second.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if _, ok := exitStatus(fd); ok {
			return true
		}
	}
	return false
}

// endThread sends a pidfd of the thread it runs on (-1 when there is
// none) and ends that thread: a goroutine that exits locked to its thread
// takes the thread with it (runtime.LockOSThread) — but the main thread,
// which never ends. On the main thread it holds it, so the goroutine it
// starts runs on another, and passes that one's pidfd on.
func endThread(fds chan<- int) {
	runtime.LockOSThread() // not undone: the thread ends with the goroutine
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan int, 1)
		go endThread(inner)
		fd := <-inner
		runtime.UnlockOSThread()
		fds <- fd
		return
	}
	fd, err := unix.PidfdOpen(unix.Gettid(), unix.PIDFD_THREAD)
	if err != nil {
		fd = -1
	}
	fds <- fd
}

package hostfs

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReadInput reads a file the operator names as input: a profile, a
// profile it extends, a seccomp profile. Only a regular file or a pipe
// (`--profile <(gen)`) is read, and at most limit bytes of
// it. A device, a directory or a socket is refused before it is opened
// (OpenAt: O_PATH, checked, then reopened through /proc/self/fd).
// A pipe is read without blocking a thread, and a signal on interrupt
// (nil: SIGINT or SIGTERM) ends the wait for its writer.
func ReadInput(name string, limit int, interrupt <-chan os.Signal) ([]byte, error) {
	fix := "give a regular file, or a pipe such as <(command)"
	f, st, err := OpenAt(unix.AT_FDCWD, name, false, func(st *unix.Stat_t) error {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if st.Size > int64(limit) {
				return fmt.Errorf("%d bytes, more than the %d KiB an input file may have", st.Size, limit>>10)
			}
		case unix.S_IFIFO:
		case unix.S_IFDIR:
			return fmt.Errorf("a directory; %s", fix)
		case unix.S_IFCHR, unix.S_IFBLK:
			return fmt.Errorf("a device; %s", fix)
		case unix.S_IFSOCK:
			return fmt.Errorf("a socket; %s", fix)
		default:
			return fmt.Errorf("not a regular file; %s", fix)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	if st.Mode&unix.S_IFMT == unix.S_IFIFO {
		data, err = readPipe(f, limit, interrupt)
	} else {
		data, err = io.ReadAll(io.LimitReader(f, int64(limit)+1))
	}
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("more than the %d KiB an input file may have", limit>>10)
	}
	return data, nil
}

// readPipe reads a pipe or FIFO opened O_NONBLOCK to its end, or to one
// byte past limit. A FIFO no writer has opened yet reads as
// its end, yet poll(2) does not call it ready (fs/pipe.c: fifo_open
// suppresses EPOLLHUP until a writer has come): the read waits in the
// runtime's poller for readiness, which a signal on interrupt ends (nil:
// SIGINT and SIGTERM are caught meanwhile). A signal taken from interrupt
// is always reported, even when the read was done by then: the channel
// is shared by every file of a run, and a signal taken is not there for
// the next one.
func readPipe(f *os.File, limit int, interrupt <-chan os.Signal) ([]byte, error) {
	if interrupt == nil {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
		interrupt = sigs
	}
	var sig os.Signal // set before exited is closed
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case sig = <-interrupt:
			f.SetReadDeadline(time.Now()) // wakes the read
		case <-done:
		}
	}()
	data, err := readToEnd(f, limit)
	close(done)
	<-exited
	if sig != nil {
		return nil, fmt.Errorf("interrupted by %s while waiting on the pipe", unix.SignalName(sig.(syscall.Signal)))
	}
	return data, err
}

// readToEnd is readPipe's loop: read when poll(2) says the pipe is ready,
// else wait in the runtime's poller.
func readToEnd(f *os.File, limit int) ([]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 4096)
	for len(buf) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			ready, err := unix.Poll(pfd, 0)
			for err == unix.EINTR { // a signal pending, even with no wait
				ready, err = unix.Poll(pfd, 0)
			}
			if ready == 0 {
				return false // wait in the poller
			}
			n, rerr = unix.Read(int(fd), buf[len(buf):min(cap(buf), limit+1)])
			return rerr != unix.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
	return buf, nil
}

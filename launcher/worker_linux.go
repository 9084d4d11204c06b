package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// WorkerName is a worker's argv[0]: agentjail's main calls Work when it
// sees it.
const WorkerName = "agentjail-launcher-worker"

// IsWorker reports whether a process started as arg0 is a worker.
func IsWorker(arg0 string) bool { return arg0 == WorkerName }

// A worker's descriptors from the daemon: the launcher's listening socket,
// and the pipe on which it says when it has taken a client (taken) and
// when it waits for the next (free).
const (
	listenFD = 3
	statusFD = 4
	taken    = 't'
	free     = 'f'
)

// MaxRuns is how many requests a worker runs before it exits, and the
// launcher starts a fresh one: what a run leaves in the process (memory,
// a goroutine) stays bounded.
const MaxRuns = 200

// forwarded are the signals a client may forward, caught for the worker's
// whole life: one arriving between runs is dropped, not fatal, except one
// that asks a process to end (stopping), which ends a worker that has no
// client (systemd stopping the launcher's unit signals every process of
// it; a worker with a client ends that run as agentjail run would).
var forwarded = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGALRM, syscall.SIGPIPE}

var stopping = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM}

// Work is a worker's life: it takes clients from the launcher's socket one
// at a time, up to MaxRuns, and runs each one's request with run, which
// gets what followed agentjail-run and returns the exit code to answer.
// For each request the client's state is made this process's own (adopt)
// and, once the run has ended, let go of again (release): run sees the
// process `agentjail run` would have been, started by the client. It
// returns when the worker should exit: the socket failed, MaxRuns were
// run, or a client's state could not be let go of. What the worker itself
// has to say goes to its own stderr, the launcher's.
func Work(run func(args []string) int) error {
	// Neither the launcher's socket nor the status pipe may reach a jail.
	for _, fd := range []int{listenFD, statusFD} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return fmt.Errorf("started without the launcher's descriptor %d: %w (a worker is started by agentjail launcher alone)", fd, err)
		}
		unix.CloseOnExec(fd)
	}
	if err := unix.SetNonblock(listenFD, true); err != nil {
		return fmt.Errorf("the launcher's socket: %w", err)
	}
	var busy atomic.Bool
	sink := make(chan os.Signal, 1)
	signal.Notify(sink, forwarded...)
	go func() {
		for s := range sink {
			if slices.Contains(stopping, s) && !busy.Load() {
				os.Exit(0)
			}
		}
	}()
	base, err := snapshot()
	if err != nil {
		return err
	}
	// The launcher's log: the worker's own stderr, wherever 2 points.
	log := os.NewFile(uintptr(base.std[2]), "launcher log")
	for range MaxRuns {
		conn, err := accept()
		if err == errLauncherGone {
			return nil
		}
		if err != nil {
			return err
		}
		busy.Store(true)
		unix.Write(statusFD, []byte{taken})
		c := &client{conn: conn}
		code := 125
		// Nothing of a client is read before it is known to be one of
		// the launcher's own user.
		err = checkPeer(conn)
		var req Request
		if err == nil {
			req, err = c.read()
		}
		if err == nil {
			err = adopt(req, c.fds)
		}
		if err != nil {
			if len(c.fds) > 2 {
				unix.Write(c.fds[2], []byte("agentjail: launcher: "+err.Error()+"\n"))
			}
			fmt.Fprintf(log, "agentjail: launcher: %v\n", err)
		} else {
			stop := c.signals()
			code = run(req.Args)
			stop()
		}
		rerr := base.release()
		c.reply(code)
		if rerr != nil {
			return fmt.Errorf("letting go of a client's state: %w; this worker exits", rerr)
		}
		// The run's garbage collected now, while no client waits, rather
		// than during the next run.
		busy.Store(false)
		runtime.GC()
		if _, err := unix.Write(statusFD, []byte{free}); err != nil {
			return errLauncherGone
		}
	}
	return nil
}

// errLauncherGone ends a worker whose launcher has exited.
var errLauncherGone = errors.New("the launcher is gone")

// accept waits for the next client, or for the launcher's end: the read
// end of the status pipe closed (POLLERR), so that no worker outlives its
// launcher (one that did would hold the socket and serve clients a new
// launcher cannot see).
func accept() (int, error) {
	for {
		fds := []unix.PollFd{{Fd: listenFD, Events: unix.POLLIN}, {Fd: statusFD}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return -1, fmt.Errorf("waiting on the launcher's socket: %w", err)
		}
		if fds[1].Revents != 0 {
			return -1, errLauncherGone
		}
		if fds[0].Revents == 0 {
			continue
		}
		// The listening socket does not block (Work): a client another
		// worker took is EAGAIN here. The connection blocks (Linux gives
		// an accepted socket none of the listener's flags): the worker
		// reads it with read(2).
		conn, _, err := unix.Accept4(listenFD, unix.SOCK_CLOEXEC)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return -1, fmt.Errorf("accept on the launcher's socket: %w", err)
		}
		return conn, nil
	}
}

// client is one connection: the descriptors that came with its request.
type client struct {
	conn int
	fds  []int
}

// reply sends the client the run's exit code and lets go of it.
func (c *client) reply(code int) {
	unix.Write(c.conn, []byte{byte(code)})
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	unix.Close(c.conn)
}

// read reads the request: the head with its descriptors, then the body.
func (c *client) read() (Request, error) {
	head := make([]byte, headLen)
	oob := make([]byte, unix.CmsgSpace(Files*4))
	n, oobn, _, _, err := unix.Recvmsg(c.conn, head, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return Request{}, fmt.Errorf("reading a request's descriptors: %w", err)
	}
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			c.fds = append(c.fds, got...)
		}
	}
	if len(c.fds) != Files {
		return Request{}, fmt.Errorf("a request with %d descriptors, not %d", len(c.fds), Files)
	}
	if _, err := io.ReadFull(fdReader(c.conn), head[n:]); err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	size, err := bodyLen(head)
	if err != nil {
		return Request{}, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(fdReader(c.conn), body); err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	return parseBody(body)
}

// signals raises here each signal the client forwards while its run is
// on, and a SIGHUP when the client is gone before its answer. The func it
// returns stops that and waits until it has stopped.
func (c *client) signals() func() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 64)
		for {
			n, err := fdReader(c.conn).Read(b)
			select {
			case <-quit:
				return
			default:
			}
			for _, s := range b[:n] {
				if s > 0 && s < 65 {
					unix.Kill(os.Getpid(), syscall.Signal(s))
				}
			}
			if err != nil {
				unix.Kill(os.Getpid(), syscall.SIGHUP)
				return
			}
		}
	}()
	return func() {
		close(quit)
		// A blocked read returns once the socket is shut down for reading.
		unix.Shutdown(c.conn, unix.SHUT_RD)
		<-done
	}
}

// fdReader reads a descriptor with read(2), blocking.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// checkPeer refuses a client of another user (who would run as the
// daemon's) or of another mount namespace (whose paths mean other files).
func checkPeer(conn int) error {
	cred, err := unix.GetsockoptUcred(conn, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("the client's credentials: %w", err)
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("a client of uid %d, not this launcher's %d: refused; run agentjail run itself, or a launcher of your own", cred.Uid, os.Geteuid())
	}
	if cred.Pid == 0 {
		return errors.New("a client in another pid namespace: refused; run agentjail run itself, or a launcher in that namespace")
	}
	var mine, theirs unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &mine); err != nil {
		return fmt.Errorf("this launcher's mount namespace: %w", err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", cred.Pid), &theirs); err != nil {
		return fmt.Errorf("the client's mount namespace: %w", err)
	}
	if mine.Dev != theirs.Dev || mine.Ino != theirs.Ino {
		return errors.New("a client in another mount namespace, where paths name other files: refused; run agentjail run itself, or a launcher in that namespace")
	}
	return nil
}

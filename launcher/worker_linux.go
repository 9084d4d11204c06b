package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WorkerName is a worker's argv[0]: agentjail's main calls Work when it
// sees it.
const WorkerName = "agentjail-launcher-worker"

// IsWorker reports whether a process started as arg0 is a worker.
func IsWorker(arg0 string) bool { return arg0 == WorkerName }

// Anchor runs work on a goroutine of its own and waits for it on the
// main goroutine, which the caller has kept locked to the main thread
// since its init (runtime.LockOSThread in an init of package main): no
// other goroutine ever runs on the main thread, so none that changes its
// thread's mount namespace and exits locked (supervise's starter) can
// leave it, through which /proc/self shows the process, in that namespace
// for the rest of the run or the worker's life. The work runs unlocked,
// without the hand-off a locked goroutine costs at each wait. It returns
// work's result.
func Anchor(work func() int) int {
	code := make(chan int)
	go func() { code <- work() }()
	return <-code
}

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

// Hooks are what Work hands the run of a request.
type Hooks struct {
	// Ready is to be called once the run catches the signals it acts on:
	// the client's, and a signal to stop sent to the worker itself, are
	// held until then and raised on the process after it (raised before,
	// they would be lost).
	Ready func()
	// Stalled is to be called when the run gave up on a write to the
	// client's output that is still blocked: the worker exits after its
	// answer rather than put another client's file, or its own log, at a
	// descriptor that write goes on to.
	Stalled func()
	// Client is the client's process id: the run's job at the client's
	// terminal (launch.IO.Job).
	Client int
}

// Work is a worker's life: it takes clients from the launcher's socket one
// at a time, up to MaxRuns, and runs each one's request with run, which
// runs req.Args as `agentjail run` ARGS, applies req.Limits to the jail
// (not to this process, which runs up to MaxRuns of them) and returns the
// exit code to answer. For each request the client's directory,
// environment, umask and standard descriptors are made this process's own
// (adopt) and, once the run has ended, let go of again (release): run sees
// the process `agentjail run` would have been, started by the client. It
// returns when the worker should exit: the launcher is gone, the socket
// failed, MaxRuns were run, or a run stalled on its output. What the
// worker itself has to say goes to its own stderr, the launcher's.
func Work(run func(req Request, h Hooks) int) error {
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
	var mnt unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &mnt); err != nil {
		return fmt.Errorf("the worker's mount namespace: %w", err)
	}
	parent := launcherOf()
	st := &state{}
	sink := make(chan os.Signal, 1)
	signal.Notify(sink, forwarded...)
	go st.stops(sink)
	base, err := snapshot()
	if err != nil {
		return err
	}
	// The launcher's log: the worker's own stderr, wherever 2 points.
	log := os.NewFile(uintptr(base.std[2]), "launcher log")
	for range MaxRuns {
		conn, err := st.accept()
		if err == errLauncherGone {
			return nil
		}
		if err != nil {
			return err
		}
		unix.Write(statusFD, []byte{taken})
		c := &client{conn: conn}
		code := 125
		stalled := false
		// Nothing of a client is read before it is known to be one of
		// the launcher's own user, in its mount namespace.
		pid, err := checkPeer(conn, mnt)
		if err != nil && closedFirst(conn) {
			err = errClosedFirst // gone before it could be checked
		}
		var req Request
		if err == nil {
			req, err = c.read()
		}
		if err == nil {
			err = adopt(req, c.fds)
		}
		if err != nil {
			c.refusal = err.Error()
			if !errors.Is(err, errClosedFirst) {
				fmt.Fprintf(log, "agentjail: launcher: %s\n", c.refusal)
			}
		} else {
			// From here the run is the client's: it will not run the
			// request itself (protocol.go).
			unix.Write(conn, []byte{Taken})
			sigs := st.begin()
			stop := c.signals(sigs)
			unwatch := watchLauncher(parent)
			code = run(req, Hooks{Ready: st.ready, Stalled: func() { stalled = true }, Client: pid})
			unwatch()
			stop()
			st.end()
		}
		if stalled {
			// Answered at once, and the worker gone without putting
			// anything at 1 and 2 again: the blocked write goes on to
			// what is there now, the client's, and ends with the worker.
			c.reply(code)
			fmt.Fprintf(log, "agentjail: launcher: a run gave up on its client's output, still being written: this worker exits\n")
			return nil
		}
		rerr := base.release()
		c.reply(code)
		if rerr != nil {
			return fmt.Errorf("letting go of a client's state: %w; this worker exits", rerr)
		}
		if st.idle() {
			return nil // a signal to stop came while the client was served
		}
		// The run's garbage collected now, while no client waits, rather
		// than during the next run.
		runtime.GC()
		if _, err := unix.Write(statusFD, []byte{free}); err != nil {
			return nil // the launcher is gone, stopped while this run went on
		}
	}
	return nil
}

// launcher is a worker's launcher: its pid, and a pidfd of it (-1
// where the kernel has none: Linux < 5.3).
type launcher struct{ pid, fd int }

func launcherOf() launcher {
	l := launcher{pid: os.Getppid(), fd: -1}
	if fd, err := unix.PidfdOpen(l.pid, 0); err == nil {
		l.fd = fd
	}
	return l
}

// gone says whether the launcher has exited (it stays in the pidfd's
// poll once it has), waiting up to wait for it.
func (l launcher) gone(wait time.Duration) bool {
	if l.fd >= 0 {
		fds := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, int(wait.Milliseconds()))
		return n > 0
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		if os.Getppid() != l.pid { // reparented: it has exited
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// watchLauncher watches, while a run goes on, for the launcher to go
// without stopping (SIGKILL, a crash). This worker would then hold the
// socket alone until its run ends, which may be hours: a client would
// wait queued on it, refused on the dead launcher's credentials, and a new
// launcher would find the path answering and not start. So the socket is
// let go at once: queued clients turned away (each runs agentjail run
// itself, protocol.go), and the socket shut down, which every worker's
// descriptor of it shares: connecting is refused, as where no launcher
// listens, and a new launcher replaces it. The status pipe closing says
// the launcher may be gone; its exit says it is (a launcher that let this
// worker go, thinking it idle, closed the pipe too, and lives on). The
// returned func ends the watch.
func watchLauncher(l launcher) (unwatch func()) {
	cancel, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fds := []unix.PollFd{{Fd: statusFD}, {Fd: int32(cancel), Events: unix.POLLIN}}
			if l.fd >= 0 {
				fds[0] = unix.PollFd{Fd: int32(l.fd), Events: unix.POLLIN}
			}
			if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			switch {
			case fds[1].Revents != 0:
				return
			case fds[0].Revents != 0:
				if l.gone(time.Second) {
					turnAway(listenFD)
					unix.Shutdown(listenFD, unix.SHUT_RDWR)
					turnAway(listenFD) // any that came in between
				}
				return
			}
		}
	}()
	return func() {
		unix.Write(cancel, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		<-done
		unix.Close(cancel)
	}
}

// state is where a worker is in its life, for the signals it gets.
type state struct {
	mu      sync.Mutex
	busy    bool           // a client is being served
	caught  bool           // its run catches signals (Hooks.Ready)
	pending chan os.Signal // raised once caught
	// stopHeld: a signal to stop the worker came while the client was
	// served, before its run caught signals.
	stopHeld bool
	readyCh  chan struct{} // closed by ready
	raised   chan struct{} // closed when the raiser has stopped
	quit     chan struct{} // the run is over: raise nothing more
}

// stops handles the worker's own signals (sink): one to stop ends a
// worker without a client, is held for a run that does not catch it yet,
// and is the run's own once it does; the others are the run's, or nobody's.
func (st *state) stops(sink <-chan os.Signal) {
	for s := range sink {
		st.mu.Lock()
		switch {
		case !st.busy && slices.Contains(stopping, s):
			os.Exit(0)
		case st.busy && !st.caught && slices.Contains(stopping, s):
			st.stopHeld = true
			select {
			case st.pending <- s:
			default:
			}
		}
		st.mu.Unlock()
	}
}

// accept is accept with the worker busy from the moment a client may be
// taken.
func (st *state) accept() (int, error) {
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
		st.mu.Lock()
		st.busy, st.caught, st.stopHeld = true, false, false
		st.pending = make(chan os.Signal, 64)
		st.mu.Unlock()
		// The listening socket does not block (Work): a client another
		// worker took is EAGAIN here. The connection blocks (Linux gives
		// an accepted socket none of the listener's flags): the worker
		// reads it with read(2), for at most requestWait until the
		// request is in.
		conn, _, err := unix.Accept4(listenFD, unix.SOCK_CLOEXEC)
		if err != nil {
			st.mu.Lock()
			st.busy = false
			st.mu.Unlock()
		}
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return -1, fmt.Errorf("accept on the launcher's socket: %w", err)
		}
		return conn, nil
	}
}

// requestWait bounds the reading of a request: a client that connects and
// sends nothing holds no worker for longer.
const requestWait = 10 * time.Second

// begin starts a run's signal handling: what the client forwards, and a
// signal to stop the worker gets before the run catches it, go to the
// channel it returns and are raised once the run is ready.
func (st *state) begin() chan<- os.Signal {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.raised, st.quit = make(chan struct{}), make(chan struct{})
	pending, raised, quit := st.pending, st.raised, st.quit
	ready := make(chan struct{})
	st.readyCh = ready
	go func() {
		defer close(raised)
		select {
		case <-ready:
		case <-quit:
			return
		}
		for {
			select {
			case s := <-pending:
				unix.Kill(os.Getpid(), s.(syscall.Signal))
			case <-quit:
				return
			}
		}
	}()
	return pending
}

// ready is Hooks.Ready.
func (st *state) ready() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.caught {
		st.caught = true
		close(st.readyCh)
	}
}

// end ends a run's signal handling: nothing more is raised.
func (st *state) end() {
	st.mu.Lock()
	close(st.quit)
	raised := st.raised
	st.mu.Unlock()
	<-raised
}

// idle ends a client's service, once it has its answer: from now on a
// signal to stop ends the worker. It reports whether one came for the
// worker itself while the client was served and no run took it (the
// request failed, or the run ended before it caught signals): the worker
// then exits too.
func (st *state) idle() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.busy = false
	stop := st.stopHeld && !st.caught
	st.stopHeld = false
	return stop
}

// errLauncherGone ends a worker whose launcher has exited.
var errLauncherGone = errors.New("the launcher is gone")

// client is one connection: the descriptors that came with its request,
// and why it was refused, if it was.
type client struct {
	conn    int
	fds     []int
	refusal string
	// older: an agentjail-run of a release before Refused, which reads
	// any first byte as the exit code: it is refused in its own terms.
	older bool
}

// reply sends the client the run's exit code, or its refusal, and lets go
// of it.
func (c *client) reply(code int) {
	switch {
	case c.refusal != "" && c.older:
		writeIfRoom(c.fds[2], "agentjail: launcher: "+c.refusal+"\n")
		unix.Write(c.conn, []byte{125})
	case c.refusal != "":
		unix.Write(c.conn, append([]byte{Refused}, c.refusal+"\n"...))
	default:
		unix.Write(c.conn, []byte{byte(code)})
	}
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	unix.Close(c.conn)
}

// writeIfRoom writes msg, a line, to fd, a client's descriptor, if fd
// takes it within refusalWait: the worker never waits on a stderr nobody
// reads (a full pipe, a paused terminal). Its O_NONBLOCK is the client's
// and stays as it is. A line longer than pipeBuf is cut to it: a pipe that
// poll(2) says has room takes that much without waiting, and no more.
func writeIfRoom(fd int, msg string) {
	if len(msg) > pipeBuf {
		msg = strings.ToValidUTF8(msg[:pipeBuf-len(cut)], "") + cut // not half a character
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	for {
		n, err := unix.Poll(fds, int(refusalWait/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 1 && fds[0].Revents&unix.POLLOUT != 0 {
			unix.Write(fd, []byte(msg))
		}
		return
	}
}

// refusalWait bounds writeIfRoom's wait.
const refusalWait = 100 * time.Millisecond

// pipeBuf is PIPE_BUF (pipe(7)): a write of at most that much to a pipe
// with room is whole, and does not wait; cut ends a line cut to it.
const (
	pipeBuf = 4096
	cut     = "...\n"
)

// read reads the request: the head with its descriptors, then the body,
// all of it within requestWait.
func (c *client) read() (Request, error) {
	deadline := time.Now().Add(requestWait)
	timed := deadlineReader{fd: c.conn, deadline: deadline}
	timed.arm()
	head := make([]byte, headLen)
	oob := make([]byte, unix.CmsgSpace(Files*4))
	// A socket with a receive timeout is not restarted after a signal
	// handler (signal(7)), Go's preemption signal included: EINTR is
	// retried, here and in fdReader.
	n, oobn, _, _, err := unix.Recvmsg(c.conn, head, oob, unix.MSG_CMSG_CLOEXEC)
	for errors.Is(err, unix.EINTR) {
		n, oobn, _, _, err = unix.Recvmsg(c.conn, head, oob, unix.MSG_CMSG_CLOEXEC)
	}
	if errors.Is(err, unix.EAGAIN) {
		return Request{}, errNoRequest
	}
	if err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	if n == 0 && oobn == 0 {
		// Closed before a byte: one that only looked whether a
		// launcher listens here (another launcher about to start).
		return Request{}, errClosedFirst
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
	if _, err := io.ReadFull(timed, head[n:]); err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	size, err := bodyLen(head)
	if err != nil {
		c.older = string(head[:len(Magic)]) == magicBefore
		return Request{}, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(timed, body); err != nil {
		return Request{}, fmt.Errorf("reading a request: %w", err)
	}
	// From here on the connection is the client's signals, for as long
	// as its run takes.
	unix.SetsockoptTimeval(c.conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{})
	return parseBody(body)
}

// signals hands to sigs (state.begin) each signal the client forwards
// while its run is on, of those it may forward, and a SIGHUP when the
// client is gone before its answer. The func it returns stops that and
// waits until it has stopped.
func (c *client) signals(sigs chan<- os.Signal) func() {
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
				if sig := syscall.Signal(s); slices.Contains(forwarded, os.Signal(sig)) {
					raise(sigs, sig)
				}
			}
			if err != nil {
				raise(sigs, syscall.SIGHUP)
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

// deadlineReader reads a descriptor until a deadline: each read waits at
// most for what is left of it (SO_RCVTIMEO).
type deadlineReader struct {
	fd       int
	deadline time.Time
}

// arm sets the socket's receive timeout to what is left (at least 1 ms).
func (d deadlineReader) arm() {
	left := max(time.Until(d.deadline), time.Millisecond)
	tv := unix.NsecToTimeval(left.Nanoseconds())
	unix.SetsockoptTimeval(d.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

func (d deadlineReader) Read(p []byte) (int, error) {
	if time.Now().After(d.deadline) {
		return 0, errNoRequest
	}
	d.arm()
	n, err := fdReader(d.fd).Read(p)
	if errors.Is(err, unix.EAGAIN) {
		err = errNoRequest
	}
	return n, err
}

var errNoRequest = fmt.Errorf("no whole request within %v", requestWait)

// errClosedFirst is a client that closed before it sent a byte: not said in
// the launcher's log.
var errClosedFirst = errors.New("closed before a request")

// closedFirst reports whether the client on conn closed it without sending
// a byte: a look at it (MSG_PEEK), which takes nothing of it.
func closedFirst(conn int) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(conn, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return n == 0 && err == nil
}

// raise queues a signal for the run; a full queue (64) drops it.
func raise(sigs chan<- os.Signal, s os.Signal) {
	select {
	case sigs <- s:
	default:
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

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5): a pidfd of the process that
// connected.
const soPeerPidfd = 77

// checkPeer refuses a client of another user (who would run as the
// launcher's) or of another mount namespace than the worker's (mine), where
// paths name other files: a jailed root, whom the kernel reports as uid 0,
// is in its jail's. The namespace is read through /proc/PID, so the pid
// must still be the client's when it is read: where the kernel gives a
// pidfd of the client, the client must still be alive after the read
// (a client that handed its connection on and exited is refused).
func checkPeer(conn int, mine unix.Stat_t) (int, error) {
	cred, err := unix.GetsockoptUcred(conn, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, fmt.Errorf("the client's credentials: %w", err)
	}
	if int(cred.Uid) != os.Geteuid() {
		return 0, fmt.Errorf("a client of uid %d, not this launcher's %d: refused; run agentjail run itself, or a launcher of your own", cred.Uid, os.Geteuid())
	}
	if cred.Pid == 0 {
		return 0, errors.New("a client in another pid namespace: refused; run agentjail run itself, or a launcher in that namespace")
	}
	pidfd, perr := unix.GetsockoptInt(conn, unix.SOL_SOCKET, soPeerPidfd)
	switch {
	case perr == nil:
		defer unix.Close(pidfd)
	case !errors.Is(perr, unix.ENOPROTOOPT):
		// Supported (an older kernel says EINVAL for a peer reaped).
		return 0, fmt.Errorf("the client's pidfd: %w (a client that is gone): refused", perr)
	}
	var theirs unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", cred.Pid), &theirs); err != nil {
		return 0, fmt.Errorf("the client's mount namespace: %w", err)
	}
	if perr == nil && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return 0, errors.New("a client that is gone (its connection handed on): refused")
	}
	if mine.Dev != theirs.Dev || mine.Ino != theirs.Ino {
		return 0, errors.New("a client in another mount namespace, where paths name other files: refused; run agentjail run itself, or a launcher in that namespace")
	}
	return int(cred.Pid), nil
}

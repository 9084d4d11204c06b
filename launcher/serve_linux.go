package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/runstate"
)

// SocketName is the launcher's socket in agentjail's run directory, where
// agentjail-run looks for it unless $AGENTJAIL_LAUNCHER names another.
const SocketName = "launcher.sock"

// DefaultSocket is where a launcher listens unless told otherwise.
func DefaultSocket() string { return filepath.Join(runstate.RunDir(), SocketName) }

// Options are a launcher's.
type Options struct {
	Socket string    // "": DefaultSocket, in the run directory checked to be the caller's alone
	Spares int       // workers kept waiting (at least 1)
	Exe    string    // the binary a worker runs ("": /proc/self/exe)
	Log    io.Writer // workers' own output (a request's goes to its client), and the launcher's
	// Ready, when set, is called once the socket listens and the first
	// workers are started.
	Ready func(socket string)
}

// Serve listens on the launcher's socket and keeps at least o.Spares
// workers waiting on it until ctx ends. A worker takes one client at a
// time and, its run over, waits for the next, up to MaxRuns; whenever
// fewer than o.Spares wait, the launcher starts another. A worker that
// fails before it took a client, or a worker that cannot be started, is
// logged and tried again after a pause that doubles while they keep
// failing (1 s up to a minute). When ctx ends the socket is removed and
// the waiting workers exit (their status pipes closed); workers running
// a request go on to its end, and exit. A worker that exits 0 (stopped by
// a signal while it waited, or done with its MaxRuns) is replaced at once.
func Serve(ctx context.Context, o Options) error {
	if o.Socket == "" {
		if err := runstate.CheckRunDir(true); err != nil {
			return err
		}
		o.Socket = DefaultSocket()
	}
	if o.Spares < 1 {
		o.Spares = 1
	}
	if o.Exe == "" {
		o.Exe = "/proc/self/exe"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ln, err := listen(o.Socket)
	if err != nil {
		return err
	}
	defer ln.Close()
	made, err := os.Lstat(o.Socket)
	if err != nil {
		return fmt.Errorf("the launcher's socket %s: %w", o.Socket, err)
	}
	defer func() {
		removeSocket(o.Socket, made)
		turnAway(int(ln.Fd()))
	}()

	d := &daemon{o: o, ln: ln, events: make(chan event), done: make(chan struct{}), workers: map[int]*worker{}}
	defer d.stop()
	for range o.Spares {
		if err := d.start(); err != nil {
			return err
		}
	}
	if o.Ready != nil {
		o.Ready(o.Socket)
	}
	// Workers are started whenever fewer than o.Spares wait, except
	// while a pause after a failure runs (retry): a worker that failed
	// before its first client, or a start that failed (no process or
	// descriptor to be had), is tried again after it, the pause doubling
	// while they keep failing, up to a minute.
	pause := time.Second
	var retry <-chan time.Time
	failed := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "agentjail: launcher: "+format+"; another in %s\n", append(args, pause)...)
		retry = time.After(pause)
		pause = min(2*pause, time.Minute)
	}
	fill := func() {
		for retry == nil && d.idle() < o.Spares {
			if err := d.start(); err != nil {
				failed("%v", err)
			}
		}
	}
	trim := time.NewTicker(trimAfter / 4)
	defer trim.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-trim.C:
			d.trim(now.Add(-trimAfter))
		case <-retry:
			retry = nil
			fill()
		case e := <-d.events:
			w := d.workers[e.pid]
			switch {
			case e.status == taken:
				w.idle, w.served = false, true
				pause = time.Second
			case e.status == free:
				w.idle, w.since = true, time.Now()
			default: // ended
				w.status.Close()
				delete(d.workers, e.pid)
				// One that exits 0, or is ended by a signal to stop
				// before it caught it, was told to stop or has run its
				// MaxRuns.
				if !w.served && !stopped(e.err) {
					failed("worker %d ended before it took a request (%v)", e.pid, e.err)
				}
			}
			fill()
		}
	}
}

type daemon struct {
	o       Options
	ln      *os.File
	events  chan event
	done    chan struct{} // closed by stop
	workers map[int]*worker
}

type worker struct {
	status *os.File  // the read end of its status pipe
	idle   bool      // waiting for a client (or starting to)
	since  time.Time // waiting since
	served bool      // has taken a client
}

// trimAfter is how long workers past Options.Spares, left waiting after a
// burst of clients, are kept: then they are let go, and the launcher's
// memory is back to its spares'.
const trimAfter = 30 * time.Second

// trim lets go of the waiting workers past o.Spares that have waited since
// before cutoff, those that waited longest first: each one's status pipe
// closed, it exits as when the launcher stops (Work).
func (d *daemon) trim(cutoff time.Time) {
	var waiting []*worker
	for _, w := range d.workers {
		if w.idle {
			waiting = append(waiting, w)
		}
	}
	slices.SortFunc(waiting, func(a, b *worker) int { return a.since.Compare(b.since) })
	for _, w := range waiting[:max(0, len(waiting)-d.o.Spares)] {
		if w.since.Before(cutoff) {
			w.idle = false
			w.status.Close()
		}
	}
}

// event is a worker's status byte (taken, free), or its end (0).
type event struct {
	pid    int
	status byte
	err    error
}

// stopped reports whether a worker's end (cmd.Wait's error) is one it
// was asked for: exit 0, or a signal to stop.
func stopped(err error) bool {
	var ee *exec.ExitError
	if err == nil {
		return true
	}
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && slices.Contains(stopping, os.Signal(ws.Signal()))
}

func (d *daemon) idle() int {
	n := 0
	for _, w := range d.workers {
		if w.idle {
			n++
		}
	}
	return n
}

// start starts a worker and relays what its status pipe says.
func (d *daemon) start() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("a pipe for a worker: %w", err)
	}
	cmd := exec.Command(d.o.Exe)
	cmd.Args[0] = WorkerName
	cmd.ExtraFiles = []*os.File{d.ln, w} // listenFD, statusFD
	cmd.Stdout, cmd.Stderr = d.o.Log, d.o.Log
	// No controlling terminal: a client's terminal is one of its
	// descriptors, never the worker's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Errorf("starting a worker (%s): %w", d.o.Exe, err)
	}
	pid := cmd.Process.Pid
	d.workers[pid] = &worker{status: r, idle: true, since: time.Now()}
	go func() {
		send := func(e event) bool {
			select {
			case d.events <- e:
				return true
			case <-d.done:
				return false
			}
		}
		b := make([]byte, 1)
		for {
			if n, _ := r.Read(b); n != 1 || !send(event{pid: pid, status: b[0]}) {
				break
			}
		}
		send(event{pid: pid, err: cmd.Wait()})
	}()
	return nil
}

// stop lets the workers go: each status pipe's read end closed, a worker
// exits once it has no client (Work).
func (d *daemon) stop() {
	close(d.done)
	for _, w := range d.workers {
		w.status.Close()
	}
}

// listen makes the launcher's socket at path, mode 0600 (each worker
// makes it non-blocking: see accept). A socket left by a launcher
// that is gone is replaced; one another launcher listens on, or a file of
// another kind, is an error.
func listen(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("the launcher's socket %s: a %s is there: remove it or give another --socket", path, kind(fi))
		}
		if c, err := dial(path); err == nil {
			unix.Close(c)
			return nil, fmt.Errorf("the launcher's socket %s: another launcher listens there: stop it first, or give another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("the launcher's socket %s, left by a launcher that is gone: %w", path, err)
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the launcher's socket: %w", err)
	}
	old := unix.Umask(0o177)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	unix.Umask(old)
	if err == nil {
		err = unix.Listen(fd, 128)
	}
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("the launcher's socket %s: its directory %s does not exist: create it (mkdir -p %[2]s), or give another --socket", path, filepath.Dir(path))
		}
		return nil, fmt.Errorf("the launcher's socket %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

func dial(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func kind(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "directory"
	case fi.Mode().IsRegular():
		return "regular file"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "file of type " + fi.Mode().Type().String()
}

// turnAway closes every connection still queued on the listening socket
// fd, once the launcher has let its workers go and removed the socket (or
// is gone: watchLauncher): no worker takes them now, and a client whose
// stream ends before Taken runs agentjail run itself (protocol.go) at
// once, not when the last run under way ends (its worker holds the socket
// too).
func turnAway(fd int) {
	if unix.SetNonblock(fd, true) != nil { // as every worker has it
		return
	}
	for {
		c, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) {
			continue
		}
		if err != nil {
			return
		}
		unix.Close(c)
	}
}

// removeSocket removes the socket at path if it is still the one made
// there (fi): a launcher started since, at the same path, keeps its own.
func removeSocket(path string, fi fs.FileInfo) {
	if now, err := os.Lstat(path); err == nil && os.SameFile(fi, now) {
		os.Remove(path)
	}
}

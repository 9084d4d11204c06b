package supervise

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// minChunk is the smallest buffer a stream reads into: large reads keep
// the copy as cheap as cat(1)'s.
const minChunk = 1 << 20

// stream copies one of the jail's output pipes to agentjail's own stream
// and to the log, unchanged and in order, counting every byte and keeping
// a capped head and tail for the record. Memory is bounded: two buffers of
// max(tail cap, 1 MiB) and the head.
//
// The tail costs no copy: reads fill one buffer front to back, then the
// other. A buffer is at least as long as the tail, so the last full buffer
// and the bytes of the current one always hold the last tailCap bytes.
type stream struct {
	src *os.File
	dst io.Writer
	log io.Writer // nil: no --log
	// tap, when set, sees every byte too, after dst (a parser of the
	// agent's output; it must not block or fail).
	tap  io.Writer
	head []byte
	// headCap and tailCap are the record's caps.
	headCap, tailCap int

	bufs     [2][]byte
	cur      int
	fill     int  // bytes in bufs[cur]
	switched bool // bufs[1-cur] is full of older bytes

	n        atomic.Int64 // bytes read
	activity *activity
	// reading is when (time since the run started) the pending Read began,
	// 0 outside Read: drain tells a reader waiting on a pipe someone still
	// holds from one blocked writing to agentjail's own slow stdout.
	reading atomic.Int64
	// writing is when the pending write to dst began, 0 outside it;
	// written counts the bytes dst took. A reader of agentjail's output
	// that stopped reading (a paused terminal, a hung pipe) shows as a
	// write that never ends.
	writing, written atomic.Int64
	// mu guards head and the tail buffers' bookkeeping, so that the record
	// can be taken while copy is stuck in a write it was given up on.
	mu sync.Mutex
	// dstErr and logErr end passing through and logging; the stream keeps
	// counting.
	dstErr, logErr error
	// ended: copy has returned.
	ended atomic.Bool
	// rechecking: recheck asked copy to read once more; cutting: drain
	// set the read deadline to end the stream.
	rechecking, cutting atomic.Bool
}

// running reports whether copy was started (it has a source: the agent's
// terminal's stream gets one once attached) and has not returned. Read on
// the supervisor's goroutine, which sets src.
func (s *stream) running() bool { return s.src != nil && !s.ended.Load() }

func newStream(src *os.File, dst, log io.Writer, headCap, tailCap int, act *activity) *stream {
	return &stream{src: src, dst: dst, log: log, headCap: headCap, tailCap: tailCap, activity: act}
}

// writePiece is the most one write to agentjail's own output carries: a
// pipe's default capacity (pipe(7)).
const writePiece = 64 << 10

// firstRead is the buffer of a stream's first read. The big buffers come
// with the first bytes: a run that prints little allocates little (and
// does not start the garbage collector).
const firstRead = 32 << 10

// copy runs until src ends (EOF, or the read deadline set by the
// supervisor once the jail is gone).
func (s *stream) copy() {
	defer s.ended.Store(true)
	read := s.readPlain
	if rc, tty := pollable(s.src); rc != nil {
		read = s.pollReader(rc, tty)
	}
	for {
		p := s.into()
		n, err := read(p)
		if n > 0 {
			s.take(p, n)
		}
		if err != nil {
			// EOF, a read error, or the poller's: the deadline drain set
			// for a source someone outside the jail still holds, or the
			// source closed.
			return
		}
		if s.dstErr != nil {
			// agentjail's own output is gone (a closed pipe): close the
			// jail's end too, so the agent meets the broken pipe itself,
			// as it would in a shell pipeline.
			s.src.Close()
			return
		}
	}
}

// readPlain is copy's read of a source that is not pollable.
func (s *stream) readPlain(p []byte) (int, error) {
	s.reading.Store(max(1, int64(time.Since(s.activity.start))))
	defer s.reading.Store(0)
	return s.src.Read(p)
}

// pollable is f's RawConn when f is nonblocking (the jail's pipes and pty
// are), nil otherwise, and whether f is a terminal (the pty's master).
func pollable(f *os.File) (rc syscall.RawConn, tty bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false
	}
	ok := false
	rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		ok = err == nil && fl&unix.O_NONBLOCK != 0
		_, err = unix.IoctlGetTermios(int(fd), unix.TCGETS)
		tty = err == nil
	})
	if !ok {
		return nil, false
	}
	return rc, tty
}

// into is where the next read goes: the rest of the current buffer, or,
// before the first bytes came, a small one of its own.
func (s *stream) into() []byte {
	if b := s.bufs[s.cur]; b != nil {
		return b[s.fill:]
	}
	return make([]byte, min(firstRead, max(s.tailCap, minChunk)))
}

// take passes on the n bytes a read put in into's buffer p.
func (s *stream) take(p []byte, n int) {
	b := s.bufs[s.cur]
	if b == nil {
		b = make([]byte, max(s.tailCap, minChunk))
		copy(b, p[:n])
		s.mu.Lock()
		s.bufs[s.cur] = b
		s.mu.Unlock()
	}
	s.chunk(b[s.fill : s.fill+n])
	s.mu.Lock()
	s.fill += n
	if s.fill == len(b) {
		s.cur, s.fill, s.switched = 1-s.cur, 0, true
	}
	s.mu.Unlock()
}

// pollReader is copy's read of a pollable source. What a source holds already
// behind a read is read ahead, up to writePiece, and goes out in one write
// to agentjail's own output and through the filter in one call.
//
// A terminal's source (the agent's pty) is read only after a wake-up of
// the poller or when it says it holds bytes (pending): a read of a pty
// master that finds nothing (os.File.Read's first try, and the one that
// ends a read-ahead) waits for the kernel's worker that moves the slave's
// output over (n_tty_read's flush_work) until it has moved all it can,
// where a wait for the poller resumes at its first bytes. The relay ran at
// 0.75–0.80× script's speed so, 0.84–0.98× without (docs/benchmarks.md,
// "The terminal's output"). What pending does not show is a hang-up: one
// whose wake-up was spent (on bytes read with it, or cleared as the next
// read began) is seen at the next read only. Once the jail has ended
// (drain's recheck), every read is made: the bytes still in the pty come,
// then the hang-up (EIO), whenever it came.
func (s *stream) pollReader(rc syscall.RawConn, tty bool) func([]byte) (int, error) {
	look := true       // the next read is made, whatever pending says
	jailEnded := false // recheck came: every read is made (a hang-up may have no wake-up left)
	return func(p []byte) (int, error) {
		for {
			look = look || jailEnded
			n, err := s.readPolled(rc, tty, p, &look)
			if errors.Is(err, os.ErrDeadlineExceeded) && !s.cutting.Load() && s.rechecking.Swap(false) {
				s.src.SetReadDeadline(time.Time{})
				jailEnded = true
				continue
			}
			return n, err
		}
	}
}

// readPolled reads into p from rc and what follows it already there, as
// pollReader says; io.EOF at the end.
func (s *stream) readPolled(rc syscall.RawConn, tty bool, p []byte, look *bool) (n int, err error) {
	wait := func() bool {
		*look = true
		s.reading.Store(max(1, int64(time.Since(s.activity.start))))
		return false
	}
	defer s.reading.Store(0)
	werr := rc.Read(func(fd uintptr) bool {
		s.reading.Store(0)
		if !*look && tty && pending(fd) == 0 {
			return wait()
		}
		*look = false
		if n, err = readFD(fd, p); err == unix.EAGAIN {
			return wait()
		}
		for limit := min(len(p), writePiece); err == nil && n > 0 && n < limit && (!tty || pending(fd) > 0); {
			m, err := readFD(fd, p[n:limit])
			if err != nil || m <= 0 {
				break // the next read meets it
			}
			n += m
		}
		return true
	})
	switch {
	case werr != nil:
		return 0, werr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// recheck tells copy that the jail has ended: from then on it makes every
// read (pollReader), and a hang-up of the agent's terminal whose wake-up
// was spent is seen. drain calls it.
func (s *stream) recheck() {
	if !s.running() {
		return
	}
	s.rechecking.Store(true)
	s.src.SetReadDeadline(time.Now())
}

// readFD is read(2) of fd, again after an interruption.
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// pending is how many bytes a read of fd would find without waiting
// (FIONREAD, TIOCINQ for a tty; for a pty master what its line discipline
// holds, not what the slave's side still queues), or -1 when fd does not
// say.
func pending(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	if err != nil {
		return -1
	}
	return n
}

func (s *stream) chunk(p []byte) {
	s.n.Add(int64(len(p)))
	s.activity.touch()
	if room := s.headCap - len(s.head); room > 0 {
		s.mu.Lock()
		s.head = append(s.head, p[:min(room, len(p))]...)
		s.mu.Unlock()
	}
	// The log first: a file takes the bytes at once, and keeps them when
	// the reader of agentjail's own output has stopped reading.
	if s.log != nil && s.logErr == nil {
		_, err := s.log.Write(p)
		s.setErr(&s.logErr, err)
	}
	// In pieces of a pipe's capacity: a slow reader that keeps taking
	// bytes restarts the clock with each piece, and written stays exact.
	for off := 0; off < len(p) && s.dstErr == nil; {
		end := min(off+writePiece, len(p))
		s.writing.Store(max(1, int64(time.Since(s.activity.start))))
		n, err := s.dst.Write(p[off:end])
		s.writing.Store(0)
		s.written.Add(int64(n))
		s.setErr(&s.dstErr, err)
		off += n
	}
	if s.tap != nil {
		s.tap.Write(p)
	}
}

// setErr records a write error under mu: the record may be taken while
// this stream still runs (given up on).
func (s *stream) setErr(dst *error, err error) {
	if err != nil {
		s.mu.Lock()
		*dst = err
		s.mu.Unlock()
	}
}

// errs returns the write errors so far.
func (s *stream) errs() (dst, log error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dstErr, s.logErr
}

// excerpt returns the head, the tail (the last bytes after the head, at
// most tailCap) and how many bytes lie between them: those copy had taken
// in when it returned, or, for a stream given up on, when excerpt runs.
func (s *stream) excerpt() (head, tail []byte, omitted int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.n.Load()
	k := min(int64(s.tailCap), total-int64(len(s.head)))
	if k <= 0 {
		return s.head, nil, total - int64(len(s.head))
	}
	cur := s.bufs[s.cur][:s.fill]
	if int64(len(cur)) >= k {
		tail = append([]byte(nil), cur[len(cur)-int(k):]...)
	} else {
		prev := s.bufs[1-s.cur]
		if !s.switched {
			prev = nil
		}
		from := max(0, len(prev)-int(k-int64(len(cur))))
		tail = append(append([]byte(nil), prev[from:]...), cur...)
	}
	return s.head, tail, total - int64(len(s.head)) - int64(len(tail))
}

// activity is when the jail last wrote a byte, as time since the run
// started (monotonic).
type activity struct {
	start time.Time
	last  atomic.Int64
}

func (a *activity) touch() { a.last.Store(int64(time.Since(a.start))) }

// idle is how long the jail has been silent.
func (a *activity) idle() time.Duration {
	return time.Since(a.start) - time.Duration(a.last.Load())
}

// drain runs after the jail has ended, until done is closed: a stream
// that has waited in Read for d is held open by a process outside the
// jail (only one handed the pipe can be), so its reading ends; reported is
// set then. A stream busy writing to agentjail's own output is left to
// finish: what is still in the pipe is never cut off. First every stream
// is told the jail has ended (recheck): a hang-up that came with its last
// bytes is seen.
func drain(streams []*stream, d time.Duration, done <-chan struct{}, cut *atomic.Bool) {
	for _, s := range streams {
		s.recheck()
	}
	t := time.NewTicker(d / 10)
	defer t.Stop()
	var begun int64
	if len(streams) > 0 {
		begun = int64(time.Since(streams[0].activity.start))
	}
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		for _, s := range streams {
			since := s.reading.Load()
			if since != 0 && time.Since(s.activity.start)-time.Duration(max(since, begun)) >= d {
				cut.Store(true) // before the cut: whoever sees the stream end sees it
				s.cutting.Store(true)
				s.src.SetReadDeadline(time.Now())
			}
		}
	}
}

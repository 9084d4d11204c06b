package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pumpThrough writes data into a pipe in random-sized chunks and runs a
// stream over it, returning what came out and the stream.
func pumpThrough(t *testing.T, data []byte, head, tail int, seed uint64) (*bytes.Buffer, *bytes.Buffer, *stream) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	s := newStream(r, &out, &log, head, tail, &activity{start: time.Now()})
	done := make(chan struct{})
	go func() { s.copy(); close(done) }()
	writePieces(t, w, data, rand.New(rand.NewPCG(seed, seed)), 300<<10)
	w.Close()
	<-done
	r.Close()
	return &out, &log, s
}

// writePieces writes data to w in pieces of 1 to most bytes.
func writePieces(t *testing.T, w io.Writer, data []byte, rng *rand.Rand, most int) {
	t.Helper()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(most))
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
}

// waitFor waits until ok, up to 30 s (a hang detector).
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

func TestStreamKeepsHeadAndTailAndEveryByte(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 5<<20+12345)
	for i := range big {
		big[i] = byte(rng.Uint32()) // NULs and invalid UTF-8 included
	}
	for _, c := range []struct {
		name       string
		size       int
		head, tail int
	}{
		{"empty", 0, 100, 100},
		{"shorter than the head", 50, 100, 100},
		{"head and part of the tail", 150, 100, 100},
		{"exactly head plus tail", 200, 100, 100},
		{"much longer, small caps", len(big), 100, 100},
		{"tail larger than a buffer", len(big), 10, 3 << 20},
		{"default caps", len(big), 1 << 20, 256 << 10},
		{"no head", len(big), 0, 1000},
		{"no tail", len(big), 1000, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := big[:c.size]
			out, log, s := pumpThrough(t, data, c.head, c.tail, uint64(c.size))
			if !bytes.Equal(out.Bytes(), data) || !bytes.Equal(log.Bytes(), data) {
				t.Fatalf("passed through %d bytes (log %d), want %d identical", out.Len(), log.Len(), len(data))
			}
			head, tail, omitted := s.excerpt()
			if s.n.Load() != int64(len(data)) {
				t.Errorf("counted %d bytes, want %d", s.n.Load(), len(data))
			}
			wantHead := data[:min(c.head, len(data))]
			rest := data[len(wantHead):]
			wantTail := rest[len(rest)-min(c.tail, len(rest)):]
			if !bytes.Equal(head, wantHead) {
				t.Errorf("head: %d bytes, want %d", len(head), len(wantHead))
			}
			if !bytes.Equal(tail, wantTail) {
				t.Errorf("tail: %d bytes, want the last %d", len(tail), len(wantTail))
			}
			if int(omitted) != len(data)-len(wantHead)-len(wantTail) {
				t.Errorf("omitted %d", omitted)
			}
		})
	}
}

// failWriter fails every write, as a stdout whose reader went away.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

func TestStreamClosesTheJailsEndWhenItsOwnOutputFails(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := newStream(r, failWriter{}, nil, 10, 10, &activity{start: time.Now()})
	done := make(chan struct{})
	go func() { s.copy(); close(done) }()
	w.Write([]byte("first"))
	<-done
	// The agent's next write meets the broken pipe, as in a shell pipeline.
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = w.Write(make([]byte, 1<<16))
	}
	if !errors.Is(werr, syscall.EPIPE) {
		t.Errorf("write after agentjail's stdout failed: %v, want EPIPE", werr)
	}
	if !errors.Is(s.dstErr, syscall.EPIPE) {
		t.Errorf("dstErr %v", s.dstErr)
	}
}

func TestDrainCutsOnlyAReaderWaitingOnAHeldPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // held open: as by a process outside the jail
	var out bytes.Buffer
	s := newStream(r, &out, nil, 10, 10, &activity{start: time.Now()})
	done := make(chan struct{})
	go func() { s.copy(); close(done) }()
	w.Write([]byte("data before the end"))
	stop := make(chan struct{})
	defer close(stop)
	var cut atomic.Bool
	go drain([]*stream{s}, 100*time.Millisecond, stop, &cut)
	<-done
	if !cut.Load() || out.String() != "data before the end" {
		t.Errorf("cut %v, passed %q", cut.Load(), out.String())
	}
}

// TestStreamOnAPtyPassesEveryByte: from a pty (read only after a wake-up
// or when it holds bytes), every byte comes through in order, and the
// stream ends at the hang-up once told the jail has ended (recheck, as
// drain does), also when the hang-up's wake-up was spent on bytes: with
// a slow reader of agentjail's output, the agent's last bytes still wait
// in the pty when it closes its end and when recheck comes.
func TestStreamOnAPtyPassesEveryByte(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		pause time.Duration // each write to agentjail's output
	}{{"fast", 0}, {"slow reader", time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mfd, err := syscall.Open("/dev/ptmx", syscall.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Skipf("no pty here: %v", err)
			}
			master := os.NewFile(uintptr(mfd), "master")
			defer master.Close()
			slave, err := openSlave(master)
			if err != nil {
				t.Fatal(err)
			}
			// Raw: the bytes pass as written (no \n to \r\n).
			if tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS); err == nil {
				tio.Oflag &^= unix.OPOST
				unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio)
			}
			data := make([]byte, 3<<20)
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			var mu sync.Mutex
			var out bytes.Buffer
			s := newStream(master, writerFunc(func(p []byte) {
				time.Sleep(c.pause)
				mu.Lock()
				out.Write(p)
				mu.Unlock()
			}), nil, 10, 10, &activity{start: time.Now()})
			done := make(chan struct{})
			go func() { s.copy(); close(done) }()
			writePieces(t, slave, data, rng, 20<<10)
			slave.Close()
			s.recheck() // as drain does, once the jail has ended
			select {
			case <-done:
			case <-time.After(30 * time.Second): // a hang detector
				t.Fatalf("the stream did not end at the hang-up: %d of %d bytes through", s.n.Load(), len(data))
			}
			mu.Lock()
			defer mu.Unlock()
			if !bytes.Equal(out.Bytes(), data) {
				t.Errorf("%d bytes through, want the %d written, identical", out.Len(), len(data))
			}
		})
	}
}

// TestStreamGoesOnAfterARecheck: a recheck of a stream whose source is
// still held open (someone outside the jail) reads once more and waits
// again: the stream is not ended by it, and later bytes come through.
func TestStreamGoesOnAfterARecheck(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	s := newStream(r, writerFunc(func(p []byte) { mu.Lock(); out.Write(p); mu.Unlock() }), nil, 10, 10, &activity{start: time.Now()})
	done := make(chan struct{})
	go func() { s.copy(); close(done) }()
	w.Write([]byte("before "))
	waitFor(t, "the first bytes", func() bool { return s.n.Load() == 7 && s.reading.Load() != 0 })
	s.recheck()
	waitFor(t, "the recheck", func() bool { return !s.rechecking.Load() && s.reading.Load() != 0 })
	w.Write([]byte("after"))
	w.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end at EOF")
	}
	if got := out.String(); got != "before after" {
		t.Errorf("passed %q, want %q", got, "before after")
	}
}

// openSlave opens the slave of the pty master m.
func openSlave(m *os.File) (*os.File, error) {
	rc, err := m.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n int
	var ierr error
	rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	})
	if ierr != nil {
		return nil, ierr
	}
	return os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
}

// TestStreamCutIsNotARecheck: drain's cut ends a stream even when a
// recheck is still pending (not yet seen by copy): the cut's deadline is
// not swallowed as the recheck's.
func TestStreamCutIsNotARecheck(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // held open: only the cut ends the stream
	s := newStream(r, io.Discard, nil, 10, 10, &activity{start: time.Now()})
	done := make(chan struct{})
	go func() { s.copy(); close(done) }()
	w.Write([]byte("x"))
	waitFor(t, "the stream to take its byte and wait", func() bool { return s.n.Load() == 1 && s.reading.Load() != 0 })
	s.rechecking.Store(true) // a recheck copy has not seen yet
	s.cutting.Store(true)    // and drain's cut, as drain sets it
	r.SetReadDeadline(time.Now())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the cut did not end the stream: taken for a recheck")
	}
}

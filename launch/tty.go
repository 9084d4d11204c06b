package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/supervise"
	"github.com/agentjail/agentjail/term"
)

// TTYMode is whether a run gives the agent a terminal of its own: a pty
// made inside the jail (supervise.Tty), the operator's terminal raw for
// the run and restored after it.
type TTYMode int

const (
	// TTYAuto: a terminal when agentjail's stdin and stdout both are
	// terminals (a person at one), else pipes.
	TTYAuto TTYMode = iota
	TTYOn           // --tty
	TTYOff          // --no-tty: pipes; stdin handed over as it is, but a terminal (jailStdin)
)

// resolveTTY decides TTYAuto for the streams a run has.
func resolveTTY(mode TTYMode, stdio IO) TTYMode {
	if mode != TTYAuto {
		return mode
	}
	if term.Save(stdio.Stdin) != nil && term.Save(stdio.Stdout) != nil {
		return TTYOn
	}
	return TTYOff
}

// interactiveLimits gives a run on a terminal of its own the profile's
// limits.interactive wall and idle limits, where set, instead of those
// for unattended runs; --timeout and --idle-timeout still win.
func interactiveLimits(p policy.Policy, req Request) policy.Policy {
	if req.TTY != TTYOn || !req.Typed {
		return p // --tty with a pipe on stdin: no one at it
	}
	if w := p.Limits.Interactive.Wall; w != nil && req.Timeout == nil {
		p.Limits.Wall = w
	}
	if i := p.Limits.Interactive.Idle; i != nil && req.IdleTimeout == nil {
		p.Limits.Idle = i
	}
	return p
}

// terminal is a run's side of the operator's terminal: the modes saved
// before the run (nil: stdin is no terminal), the filters on the outputs
// that are terminals, and the agent's own terminal when it has one.
type terminal struct {
	saved     *term.State
	pty       *supervise.Tty // nil: pipes
	filters   []*filtered
	clipboard bool // --allow-clipboard
	job       int  // IO.Job
	// watching ends the watch begin starts; watched is closed once it
	// has ended.
	watching, watched chan struct{}
}

// filtered is one of agentjail's outputs that is a terminal, behind a
// term.Filter.
type filtered struct {
	w io.Writer
	f *term.Filter
}

// openTerminal sets up the terminal side of a run: the jail's output to
// stdout and stderr filtered where they are terminals, and with a pty,
// stdin raw (when it is a terminal) and the agent's terminal ready to be
// attached (control). It returns the streams the supervisor writes to.
func openTerminal(req Request, stdio IO, saved *term.State) (*terminal, io.Writer, io.Writer) {
	t := &terminal{saved: saved, clipboard: req.AllowClipboard, job: stdio.Job}
	wrap := func(w io.Writer) io.Writer {
		if term.Save(w) == nil {
			return w
		}
		f := &filtered{w: w, f: term.NewFilter(w, req.AllowClipboard)}
		t.filters = append(t.filters, f)
		return f.f
	}
	stdout, stderr := wrap(stdio.Stdout), wrap(stdio.Stderr)
	if req.TTY == TTYOn {
		// Escapes only where a person types.
		t.pty = supervise.NewTty(saved, saved != nil)
		if saved != nil {
			rdev := ttyRdev(saved.Fd())
			t.pty.Foreground = func() bool { return inForeground(t.job, rdev) }
		}
	}
	return t, stdout, stderr
}

// control hands the exec stage's messages to what they are for; a
// message nothing here asked for has its descriptors closed.
func (t *terminal) control(m execstage.Message, files []*os.File) {
	if m.Kind == execstage.KindPTY && t.pty != nil && len(files) == 1 {
		t.pty.Attach(files[0], m.Sender)
		return
	}
	for _, f := range files {
		f.Close()
	}
}

// begin makes the operator's terminal raw for a run with a pty, and keeps
// it so while the run goes on: whenever the run's job is the terminal's
// foreground and it is not raw (fg after kill -STOP: the shell made it its
// own meanwhile, and may set its modes again after it has handed the
// terminal back). In the background it is left alone: a run started
// there (&) is never stopped on SIGTTOU, which it would meet again at each
// SIGCONT, so that `kill %1` could never end it. Each time the run gets
// the terminal back, resize hears of it: the kernel sends SIGWINCH only to
// the foreground, so the operator may have resized it meanwhile.
func (t *terminal) begin(resize chan<- os.Signal) error {
	if t.pty == nil || t.saved == nil {
		return nil
	}
	if _, err := t.rawInForeground(); err != nil {
		return fmt.Errorf("cannot make the terminal raw for the agent's own: %w", err)
	}
	t.watching, t.watched = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.watched)
		for {
			select {
			case <-t.watching:
				return
			case <-time.After(relayWait):
			}
			if back, _ := t.rawInForeground(); back {
				select {
				case resize <- unix.SIGWINCH:
				default: // a resize is pending already
				}
			}
		}
	}()
	return nil
}

// rawInForeground makes the terminal raw where the run's job is its
// foreground and it is not raw already: with SIGTTOU blocked on the thread
// (never stopped for it), and set back should the job have left the
// foreground meanwhile (the shell's terminal stays as the shell has it).
// It reports whether it made it raw (the run got the terminal back).
func (t *terminal) rawInForeground() (bool, error) {
	if !t.pty.Foreground() || t.saved.IsRaw() {
		return false, nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unblock, err := term.BlockOnThread(unix.SIGTTOU)
	if err != nil {
		return false, err
	}
	defer unblock()
	fd := t.saved.Fd()
	before, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return false, err
	}
	if err := t.saved.MakeRaw(); err != nil {
		return false, err
	}
	if !t.pty.Foreground() {
		return false, unix.IoctlSetTermios(fd, unix.TCSETS, before)
	}
	return true, nil
}

// warn tells the person at the terminal, which is raw, that a limit
// comes: on a line of its own, in plain characters (the agent may have
// left its text concealed or in line drawing; it sets its own again).
func (t *terminal) warn(w io.Writer) func(string) {
	if t.pty == nil || t.saved == nil {
		return nil
	}
	return func(msg string) { fmt.Fprintf(w, "\r\n%sagentjail: warning: %s\r\n", term.Reset, msg) }
}

// end runs once the jail has ended, its output delivered: the operator's
// terminal gets its modes back, and each output that is a terminal the
// reset of what the output left set (nothing where it held no escape),
// before agentjail's own messages; none where agentjail gave up writing
// to it (abandoned). The record learns what passed.
func (t *terminal) end(rec *record.Record, abandoned [2]bool) {
	if t.watching != nil {
		close(t.watching)
		<-t.watched
	}
	if _, err := t.saved.Restore(); err != nil && !errors.Is(err, unix.EIO) {
		// EIO: the terminal hung up; there is nothing to restore.
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("cannot restore the terminal's modes: %v; run `stty sane`", err))
	}
	if len(t.filters) == 0 && t.pty == nil {
		return
	}
	if rec.Terminal == nil {
		rec.Terminal = &record.Terminal{}
	}
	rec.Terminal.ClipboardAllowed = t.clipboard
	for _, f := range t.filters {
		rec.Terminal.StringsDropped += f.f.Seen.Dropped
	}
	if abandoned[0] || abandoned[1] {
		return
	}
	// Stdout and stderr on one terminal get one reset, of what either
	// left.
	if len(t.filters) == 2 && sameFile(t.filters[0].w, t.filters[1].w) {
		t.filters[0].f.Join(t.filters[1].f)
		t.filters = t.filters[:1]
	}
	for _, f := range t.filters {
		if r := f.f.Reset(); r != "" {
			io.WriteString(f.w, r)
			rec.Terminal.ScreenReset = true
		}
	}
}

// sameFile reports whether a and b are files on one inode (one terminal).
func sameFile(a, b io.Writer) bool {
	same, known := compareFiles(a, b)
	return known && same
}

// apart reports whether a and b are known to be different files: a writer
// that is no file, or one that cannot be told, is taken for the same.
func apart(a, b io.Writer) bool {
	same, known := compareFiles(a, b)
	return known && !same
}

// compareFiles reports whether a and b are files on one inode, and whether
// that could be told (both files, both fstat'able). Stat takes no lock a
// write still blocked on the file holds, nor changes its blocking mode.
func compareFiles(a, b io.Writer) (same, known bool) {
	fa, ok := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok || !ok2 {
		return false, false
	}
	sa, err := fa.Stat()
	sb, err2 := fb.Stat()
	if err != nil || err2 != nil {
		return false, false
	}
	return os.SameFile(sa, sb), true
}

// midLine reports whether the agent's terminal's output ended in the
// middle of a line: agentjail's own messages, on the same terminal, then
// start on a line of their own.
func (t *terminal) midLine(rec record.Record) bool {
	if t.pty == nil {
		return false
	}
	last := rec.Excerpt.Stdout.Tail
	if last == "" {
		last = rec.Excerpt.Stdout.Head
	}
	return last != "" && !strings.HasSuffix(last, "\n")
}

package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/reaper"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate/live"
	"github.com/agentjail/agentjail/term"
)

// KillWait bounds the wait for the jail to end after SIGKILL; its expiry
// is reported in the record (kill_wait_expired), never ignored.
const KillWait = 10 * time.Second

// teardownWait bounds the wait for the pid namespace's teardown after
// bwrap has exited (milliseconds, normally).
const teardownWait = 5 * time.Second

// drainWait bounds reading what is left in the output pipes once the jail
// has ended: only a process outside the jail that was handed a pipe
// (SCM_RIGHTS) can hold one open longer.
const drainWait = 2 * time.Second

// Spec is one supervised run.
type Spec struct {
	Bwrap string
	Args  []string // bwrap's argv after argv[0] (mounts.Plan.Args)
	Env   []string // the jail's environment, given to bwrap as its own
	// Cred, when set, is the run user bwrap is started as.
	Cred   *syscall.Credential
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Log, when set, receives both streams too (--log).
	Log io.Writer
	// StdoutTap, when set, sees every byte of stdout as it passes (the
	// parser of claude's json output); it must not block. Run returns only
	// after the last Write to it.
	StdoutTap io.Writer
	// Seccomp are compiled filters, passed from fd execstage.FDSeccomp on.
	Seccomp []*os.File
	// Control, when set, is called with each message the exec stage sends
	// on its control channel (execstage.ReadControl), which bwrap gets as
	// execstage.FDControl, from a goroutine of its own; it owns the files.
	// Run returns after its last call. Unset, that descriptor is closed.
	Control func(m execstage.Message, files []*os.File)

	// RunID is the value of the AGENTJAIL_RUN marker in Env.
	RunID string
	// Wall, Idle: 0 is none. Grace: time between SIGTERM and SIGKILL.
	Wall, Idle, Grace time.Duration
	// Head and Tail cap what the record keeps of each stream.
	Head, Tail int
	// Rlimits maps policy resource names (nofile, ...) to values
	// (math.MaxUint64: unlimited). The exec stage applies them (the plan
	// carries them); Run only raises its own hard limits where it may.
	Rlimits map[string]uint64
	// Cgroup asks for a per-run cgroup; PidsMax, MemoryMax (0: none) and
	// SwapMax (with MemoryMax) are set in it where the controllers exist.
	// A jail that reaches PidsMax or MemoryMax is ended (record.ExitLimit).
	// Without a pids controller PidsMax becomes the rlimit nproc, unless
	// Rlimits sets one.
	Cgroup                      bool
	PidsMax, MemoryMax, SwapMax int64
	// ProcRoot is /proc (tests of the pure parts use fixture trees).
	ProcRoot string
	// SharedPIDs says the jail has no pid namespace of its own (the /proc
	// fallback): what the agent left running outlives bwrap, so once the
	// jail has ended every process still below agentjail is killed. Only
	// for a supervisor whose every child is the jail's (agentjail run).
	SharedPIDs bool
	// Signals are the signals agentjail receives (signal.Notify).
	Signals <-chan os.Signal
	// Live, when set, publishes the run (live.New): Run opens it, stop
	// requests come from it and ps reads the status through it.
	Live *live.Live
	// Hold, when set, keeps the sandbox from running the agent until it is
	// closed: work that must precede the agent but not bwrap (a snapshot of
	// the writable roots) is done while bwrap sets the jail up.
	Hold <-chan struct{}
	// OnStarter, when set, runs on the thread bwrap is started from before
	// anything else of the run (see starter): what bwrap must inherit from
	// that thread, the run's private mount namespace, is made there.
	OnStarter func() error
	// Secrets are values redacted from the record's excerpts; Hidden,
	// those of them the jail does not hold (record.RedactExcerpt).
	Secrets, Hidden []string
	// Tty, when set, runs the agent on a terminal of its own (NewTty);
	// Stdin is then what the operator types, copied to it.
	Tty *Tty
	// Warn, when set, is told ahead of the wall or idle limit
	// (warnAhead) that it will end the run: a person at the terminal may
	// want to finish, or type to stay.
	Warn func(msg string)
	// Record is the record so far (run id, profile, argv, user, bwrap
	// version, degradations, start time); Run completes it.
	Record record.Record
}

// status is one line of bwrap's --json-status-fd.
type status struct {
	ChildPID *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// Outcome is how a supervised run ended: its record, completed, and what
// the run's owner must know to speak after it.
type Outcome struct {
	Record record.Record
	// StderrMidLine: the jail's stderr ended in the middle of a line, so
	// a message printed after the run must start on a line of its own.
	StderrMidLine bool
	// Abandoned[i]: agentjail gave up delivering the jail's output to its
	// own stdout (0) or stderr (1), where a write would block.
	Abandoned [2]bool
}

// Run starts bwrap, supervises it to the end and returns the outcome. The
// error, when set, is agentjail's own message for the user (reason
// setup_failed, or cleanup that failed); the record is complete either
// way. Run requires reaper.Begin: bwrap is started through the reaper,
// which owns wait4(-1).
func Run(spec Spec) (Outcome, error) {
	if spec.ProcRoot == "" {
		spec.ProcRoot = "/proc"
	}
	s := &supervisor{spec: spec, rec: spec.Record}
	if time.Time(s.rec.StartedAt).IsZero() {
		s.rec.StartedAt = record.Time(time.Now())
	}
	s.start = time.Time(s.rec.StartedAt)
	s.rec.Limits = record.Limits{
		WallMS: spec.Wall.Milliseconds(), IdleMS: spec.Idle.Milliseconds(), GraceMS: spec.Grace.Milliseconds(),
		KillWaitMS: KillWait.Milliseconds(), OutputHead: spec.Head, OutputTail: spec.Tail,
		Rlimits: map[string]string{},
	}
	err := s.run()
	s.rec.Finish(time.Now())
	return Outcome{Record: s.rec, StderrMidLine: s.midLine, Abandoned: s.abandoned}, err
}

type supervisor struct {
	spec      Spec
	rec       record.Record
	start     time.Time
	since     procs.Since // the process table before bwrap started
	midLine   bool        // the jail's last stderr byte was not a newline
	abandoned [2]bool     // agentjail gave up writing to its stdout, stderr

	cmd     *exec.Cmd
	box     *sandbox
	cgroup  *runCgroup
	act     *activity
	streams [2]*stream
	copying sync.WaitGroup

	tty     *agentTerminal // the agent's terminal, once attached
	typing  *typing        // the operator's input to it
	escapes chan byte      // escape commands the operator typed
	escaped bool           // ~. ended the run

	cause     string         // the first of wall/idle/stopped/interrupted/pids_limit/memory_limit
	causeSig  syscall.Signal // the signal agentjail received, for interrupted
	hurried   syscall.Signal // an ending signal that came while the run was ending or after the jail ended
	killed    bool           // SIGKILL was sent
	exitCode  *int           // bwrap's exit-code line
	childPID  int
	setupErr  error
	waitState *syscall.WaitStatus

	mu sync.Mutex // guards exitCode and childPID against the status reader
}

func (s *supervisor) run() error {
	sp := s.spec
	// Whatever carries the run's marker is created from now on: the sweep
	// at the end looks only at those pids.
	s.since = procs.Mark(sp.ProcRoot)
	var pipes [10]*os.File // status, exec report, block, stdout, stderr: read and write ends
	defer func() {
		for _, f := range pipes {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := 0; i < len(pipes); i += 2 {
		var err error
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			return s.setupFailed(fmt.Errorf("create pipes: %w", err))
		}
	}
	statusR, statusW, reportR, reportW, blockR, blockW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	outR, outW, errR, errW := pipes[6], pipes[7], pipes[8], pipes[9]
	// Larger pipes mean fewer wake-ups per megabyte; best effort (the
	// default 64 KiB works, only slower).
	for _, w := range []*os.File{outW, errW} {
		unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	}

	if sp.Cgroup {
		var notes []record.Note
		s.cgroup, notes = makeCgroup(sp.ProcRoot, sp.RunID, cgroupLimits{sp.PidsMax, sp.MemoryMax, sp.SwapMax})
		s.rec.Degradations = append(s.rec.Degradations, notes...)
	}

	var control, controlStage *os.File // nil: the stage's descriptor is closed
	if sp.Control != nil {
		var err error
		if control, controlStage, err = execstage.Pair(); err != nil {
			return s.setupFailed(err)
		}
		defer control.Close()
		defer controlStage.Close()
	}

	cmd := exec.Command(sp.Bwrap, sp.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sp.Stdin, outW, errW
	if sp.Tty != nil {
		// The operator's terminal never enters the jail: the agent's is
		// the pty, and bubblewrap's own output is stderr.
		cmd.Stdin, cmd.Stdout = nil, errW
	}
	cmd.ExtraFiles = append([]*os.File{statusW, reportW, blockR, controlStage}, sp.Seccomp...)
	// Only a stdin that is not a file is copied by a goroutine cmd.Wait
	// waits for; a reader that never returns must not hold the run.
	cmd.WaitDelay = time.Second
	st, err := newStarter(sp.OnStarter)
	defer st.stop()
	if err != nil {
		return s.setupFailed(err)
	}
	st.do(func() { err = s.startBwrap(cmd) })
	if err != nil && s.cgroup != nil {
		s.rec.Degradations = append(s.rec.Degradations, record.Note{What: "cgroup", Detail: fmt.Sprintf("cannot start bwrap inside %s: %v; started without a cgroup of its own, so without its limits", s.cgroup.dir, err)})
		s.cgroup.end(sp.ProcRoot, time.Second)
		s.cgroup = nil
		cmd = &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Stdin: cmd.Stdin, Stdout: cmd.Stdout,
			Stderr: cmd.Stderr, ExtraFiles: cmd.ExtraFiles, WaitDelay: cmd.WaitDelay}
		st.do(func() { err = s.startBwrap(cmd) })
	}
	// The child holds its ends now; ours would keep the pipes open.
	for _, f := range []*os.File{statusW, reportW, blockR, outW, errW, controlStage} {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		s.endCgroup()
		return s.setupFailed(fmt.Errorf("start %s: %w", sp.Bwrap, err))
	}
	s.cmd = cmd
	if s.cgroup != nil {
		s.rec.Limits.Cgroup, s.rec.Limits.CgroupV1 = s.cgroup.dir, maps.Clone(s.cgroup.v1)
		s.rec.Limits.PidsMax, s.rec.Limits.MemoryMax, s.rec.Limits.SwapMax = s.cgroup.pidsMax, s.cgroup.memoryMax, s.cgroup.swapMax
	}
	done, err := reaper.Done(cmd)
	if err != nil {
		return s.setupFailed(err)
	}

	s.act = &activity{start: s.start}
	for i, p := range []struct {
		r   *os.File
		dst io.Writer
	}{{outR, sp.Stdout}, {errR, sp.Stderr}} {
		if i == 0 && sp.Tty != nil {
			p.r = nil // the pty's master, once attached
		}
		s.streams[i] = newStream(p.r, p.dst, sp.Log, sp.Head, sp.Tail, s.act)
		if i == 0 {
			s.streams[i].tap = sp.StdoutTap
		}
		if p.r != nil {
			s.copying.Go(s.streams[i].copy)
		}
	}
	if sp.Live != nil {
		// While bwrap sets the jail up: off the launch's critical path.
		var cg string
		var v1 []string
		if s.cgroup != nil {
			cg, v1 = s.cgroup.dirs()
		}
		sp.Live.SetStatus(s.status)
		if err := sp.Live.Open(cg, v1); err != nil {
			s.rec.Degradations = append(s.rec.Degradations, record.Note{What: "live", Detail: fmt.Sprintf("cannot publish the run: %v; `agentjail ps` and `agentjail stop` cannot see it", err)})
		}
	}

	childPIDs := make(chan int, 1)
	statusDone := make(chan struct{})
	go s.readStatus(statusR, childPIDs, statusDone)
	controlDone := make(chan []string, 1)
	if control != nil {
		go readControl(control, sp.Control, controlDone)
	} else {
		controlDone <- nil
	}

	s.watch(done, childPIDs, blockW)

	// The jail has ended (or would not die within KillWait). Kill what is
	// left: the cgroup first, then anything still carrying the marker. The
	// /proc scan, the slow part, runs meanwhile on another thread; what it
	// found and still runs once the pid namespace and the cgroup are gone
	// is an orphan.
	type scan struct {
		procs []procs.Proc
		err   error
	}
	scanned := make(chan scan, 1)
	go func() {
		procs, err := procs.MarkedBy(sp.ProcRoot, sp.RunID, s.since)
		scanned <- scan{procs, err}
	}()
	if s.box != nil && !s.rec.KillWaitExpired && !s.box.waitExit(teardownWait) {
		s.rec.Warnings = append(s.rec.Warnings, fmt.Sprintf("the jail's pid namespace was not torn down %v after bubblewrap exited", teardownWait))
	}
	if s.cgroup != nil {
		// A cap reached after the last poll (the agent gave up on a
		// refused fork, or its OOM kill ended the jail) counts too.
		u := s.cgroup.usage(true)
		l := &s.rec.Limits
		l.PidsRefused, l.OOMKills, l.PidsPeak, l.MemoryPeak = u.refused, u.oomKills, u.pidsPeak, u.memoryPeak
		if s.cause == "" {
			s.cause = u.exceeded()
		}
	}
	s.endCgroup()
	found := <-scanned
	if found.err != nil {
		s.rec.Warnings = append(s.rec.Warnings, "marker sweep: "+found.err.Error())
	}
	s.sweep(found.procs)
	if sp.SharedPIDs {
		killed, err := procs.KillDescendants(sp.ProcRoot)
		s.addOrphans(killed)
		if err != nil {
			s.rec.Warnings = append(s.rec.Warnings, "ending what the jail left below agentjail: "+err.Error())
		}
	}
	if s.box != nil {
		s.box.close()
	}
	if s.typing != nil {
		s.typing.stop()
	}
	drained, copied := make(chan struct{}), make(chan struct{})
	var cut atomic.Bool
	go drain(s.streams[:], drainWait, drained, &cut)
	go func() { s.copying.Wait(); close(copied) }()
	s.awaitDelivery(copied)
	close(drained)
	if cut.Load() {
		s.rec.Warnings = append(s.rec.Warnings, "output was still held open after the jail ended (a process outside it was handed a pipe); stopped reading")
	}
	// bwrap wrote both before exiting; the deadline only bounds a bwrap
	// that would not die.
	for _, f := range []*os.File{statusR, reportR, control} {
		if f != nil {
			f.SetReadDeadline(time.Now().Add(drainWait))
		}
	}
	<-statusDone
	s.rec.Warnings = append(s.rec.Warnings, <-controlDone...)
	report, _ := io.ReadAll(reportR)
	s.endTty()
	if s.waitState != nil {
		reaper.Release(cmd)
	}
	s.finishOutput()
	return s.outcome(report)
}

// startBwrap starts bwrap as the run user, into the run's cgroup v2 when there
// is one. Without a pids limit in a cgroup, limits.pids becomes the rlimit
// nproc (unless the profile sets one): bwrap's environment carries it to
// the exec stage (execstage.NprocVar), which sets it with the rest.
func (s *supervisor) startBwrap(cmd *exec.Cmd) error {
	sp := s.spec
	cmd.Env, cmd.SysProcAttr = sp.Env, procAttr(sp.Cred)
	rlimits := sp.Rlimits
	if _, set := sp.Rlimits["nproc"]; sp.PidsMax > 0 && !set && (s.cgroup == nil || s.cgroup.pidsMax == nil) {
		cmd.Env = append(slices.Clip(sp.Env), execstage.NprocVar+"="+strconv.FormatInt(sp.PidsMax, 10))
		rlimits = maps.Clone(sp.Rlimits)
		if rlimits == nil {
			rlimits = map[string]uint64{}
		}
		rlimits["nproc"] = uint64(sp.PidsMax)
	}
	raiseHard(rlimits)
	if s.cgroup != nil && s.cgroup.fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, s.cgroup.fd
	}
	return reaper.Start(cmd)
}

// streamNames name s.streams, agentjail's own stdout and stderr, in
// messages.
var streamNames = [2]string{"stdout", "stderr"}

// stallWait is how long, once the jail has ended, agentjail waits on a
// reader of its own output that takes nothing (a terminal paused with ^S,
// a hung log shipper) before it gives up delivering the rest.
const stallWait = 30 * time.Second

// hurryWait is how long a reader of agentjail's output may take nothing
// once agentjail was told to end (a signal after the jail ended, or while
// it was ending) before it is given up on.
const hurryWait = time.Second

// awaitDelivery waits, once the jail has ended, until what was read from
// it has reached agentjail's stdout and stderr. A slow reader is waited
// for as long as it takes bytes; one whose pending write has taken nothing
// for stallWait is given up on: its copy is abandoned (still blocked in
// the write, which only the exit ends), and the record says how much went
// undelivered. A SIGINT, SIGTERM, SIGHUP or SIGQUIT to agentjail shortens
// that to hurryWait, from the start when one came while the run was
// ending (watch took it). A stream that is still moving is waited for
// either way.
func (s *supervisor) awaitDelivery(copied <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	limit, why := stallWait, fmt.Sprintf("after %v without a byte taken", stallWait)
	hurry := func(n syscall.Signal) { limit, why = hurryWait, "on "+procs.SignalName(n) }
	if s.hurried != 0 {
		hurry(s.hurried)
	}
	for {
		select {
		case <-copied:
			return
		case sig := <-s.spec.Signals:
			if n, ok := s.received(sig); ok && ends(n) {
				hurry(n)
			}
			continue
		case <-tick.C:
		}
		settled := true
		for i, st := range s.streams {
			if s.abandoned[i] || !st.running() {
				continue
			}
			if w := st.writing.Load(); w != 0 && time.Since(st.activity.start)-time.Duration(w) >= limit {
				kept := "the record's excerpt has their head and tail; --log would have them all"
				if s.spec.Log != nil {
					kept = "--log has them"
				}
				s.rec.Warnings = append(s.rec.Warnings, fmt.Sprintf("agentjail's %s stopped taking output; gave up %s with %d bytes undelivered (%s)",
					streamNames[i], why, st.n.Load()-st.written.Load(), kept))
				s.abandoned[i] = true
				continue
			}
			settled = false
		}
		if settled {
			return
		}
	}
}

// received records a signal agentjail got, and returns it, unless it is
// one caught only for its side effect: SIGPIPE (so that writes report
// EPIPE) or SIGURG (the Go runtime's).
func (s *supervisor) received(sig os.Signal) (syscall.Signal, bool) {
	n, ok := sig.(syscall.Signal)
	if !ok || n == syscall.SIGPIPE || n == syscall.SIGURG {
		return 0, false
	}
	s.rec.SignalsReceived = append(s.rec.SignalsReceived, record.SignalEvent{Signal: procs.SignalName(n), At: record.Time(time.Now())})
	return n, true
}

// ends reports whether a signal to agentjail ends the run (after the
// grace): SIGINT, SIGTERM, SIGHUP, SIGQUIT.
func ends(n syscall.Signal) bool {
	return n == syscall.SIGINT || n == syscall.SIGTERM || n == syscall.SIGHUP || n == syscall.SIGQUIT
}

// procAttr starts bwrap as the run user, killed when agentjail's thread
// dies, and in a process group of its own: a terminal's ^C or ^\ (sent to
// the foreground process group, agentjail's) must reach agentjail only,
// which forwards it with the grace, not kill bwrap outright (bwrap has no
// handler for SIGINT).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// watch is the event loop: it returns once bwrap has been reaped, or when
// the bounded wait after SIGKILL runs out.
func (s *supervisor) watch(done <-chan syscall.WaitStatus, childPIDs <-chan int, blockW *os.File) {
	sp := s.spec
	never := make(chan time.Time)
	timer := func(d time.Duration) (*time.Timer, <-chan time.Time) {
		if d <= 0 {
			return nil, never
		}
		t := time.NewTimer(d)
		return t, t.C
	}
	wallT, wall := timer(sp.Wall)
	idleT, idle := timer(sp.Idle)
	// A jail at its pids.max keeps running: a fork bomb spins on refused
	// forks until killed. Polled, not notified: cgroup v1 files do not
	// notify (limitPoll).
	var limits <-chan time.Time
	if s.cgroup != nil && (s.cgroup.pidsMax != nil || s.cgroup.memoryMax != nil) {
		t := time.NewTicker(limitPoll)
		defer t.Stop()
		limits = t.C
	}
	var graceT, killT *time.Timer
	grace, killWait := (<-chan time.Time)(never), (<-chan time.Time)(never)
	defer func() {
		for _, t := range []*time.Timer{wallT, idleT, graceT, killT} {
			if t != nil {
				t.Stop()
			}
		}
		blockW.Close()
	}()
	var stops <-chan struct{}
	if sp.Live != nil {
		stops = sp.Live.Stops()
	}

	var ttys <-chan *agentTerminal
	if sp.Tty != nil {
		ttys = sp.Tty.attached
	}
	// The warnings ahead of the limits, for a person at the terminal.
	var wallWarnT, idleWarnT *time.Timer
	wallWarn, idleWarn := (<-chan time.Time)(never), (<-chan time.Time)(never)
	idleWarned := false
	if sp.Warn != nil {
		if sp.Wall > 0 {
			wallWarnT, wallWarn = timer(sp.Wall - warnAhead(sp.Wall))
		}
		if sp.Idle > 0 {
			idleWarnT, idleWarn = timer(sp.Idle - warnAhead(sp.Idle))
		}
		defer func() {
			for _, t := range []*time.Timer{wallWarnT, idleWarnT} {
				if t != nil {
					t.Stop()
				}
			}
		}()
	}

	escalate := func(cause string, first syscall.Signal) {
		if s.cause == "" {
			s.cause = cause
		}
		if graceT != nil || s.killed {
			return // already escalating
		}
		s.signal(first)
		// A stopped process acts on nothing but SIGKILL until it is
		// continued (as timeout(1) does).
		s.signal(syscall.SIGCONT)
		if sp.Grace <= 0 {
			s.kill()
			killT, killWait = timer(KillWait)
			return
		}
		graceT, grace = timer(sp.Grace)
	}

	for {
		select {
		case ws := <-done:
			s.waitState = &ws
			return
		case pid := <-childPIDs:
			if err := s.adopt(pid, blockW); err != nil {
				s.setupErr = err
				s.kill()
				killT, killWait = timer(KillWait)
			}
		case <-wall:
			escalate(record.ReasonWallTimeout, syscall.SIGTERM)
		case <-idle:
			if d := s.act.idle(); d < sp.Idle {
				idleT.Reset(sp.Idle - d)
				if idleWarned {
					idleWarned = false
					idleWarnT.Reset(max(0, sp.Idle-warnAhead(sp.Idle)-d))
				}
				continue
			}
			escalate(record.ReasonIdleTimeout, syscall.SIGTERM)
		case <-wallWarn:
			if s.cause == "" {
				sp.Warn(fmt.Sprintf("the wall limit (%v) ends this run in %v", sp.Wall, warnAhead(sp.Wall)))
			}
		case <-idleWarn:
			ahead := warnAhead(sp.Idle)
			if d := s.act.idle(); d < sp.Idle-ahead {
				idleWarnT.Reset(sp.Idle - ahead - d)
				continue
			}
			idleWarned = true // again once there was activity (case <-idle)
			if s.cause == "" {
				sp.Warn(fmt.Sprintf("nothing printed or typed for %v: the idle limit (%v) ends this run in %v unless something is", sp.Idle-ahead, sp.Idle, ahead))
			}
		case a := <-ttys:
			if a.err != nil {
				s.setupErr = fmt.Errorf("the agent's terminal: %w", a.err)
				s.kill()
				killT, killWait = timer(KillWait)
				continue
			}
			s.attach(a)
		case cmd := <-s.escapes:
			switch cmd {
			case term.EscapeEnd:
				if s.cause == "" {
					s.escaped = true
				}
				escalate(record.ReasonStopped, syscall.SIGTERM)
			case term.EscapeHelp:
				io.WriteString(sp.Stderr, term.EscapeHelpText)
			}
		case <-stops:
			escalate(record.ReasonStopped, syscall.SIGTERM)
		case <-limits:
			if s.cause != "" {
				continue // ending already
			}
			if r := s.cgroup.usage(false).exceeded(); r != "" {
				// No grace: a fork bomb would go on for all of it, and
				// after an OOM kill the jail is short of a process (on
				// cgroup v2 memory.oom.group has killed it whole).
				s.cause = r
				s.kill()
				s.cgroup.kill()
				killT, killWait = timer(KillWait)
			}
		case sig := <-sp.Signals:
			if sig == syscall.SIGWINCH {
				if s.tty != nil {
					s.tty.resize(sp.Tty.Operator)
				}
				continue
			}
			n, ok := s.received(sig)
			if !ok {
				continue
			}
			switch {
			case ends(n):
				select {
				case ws := <-done:
					// The jail had ended already: the signal is for what
					// follows, the delivery of its output.
					s.waitState, s.hurried = &ws, n
					return
				default:
				}
				if s.cause != "" && s.hurried == 0 {
					// Ending already: the operator wants agentjail gone,
					// output delivery included (awaitDelivery).
					s.hurried = n
				}
				if s.cause != "" && (n == syscall.SIGINT || n == syscall.SIGTERM) && !s.killed {
					// A second SIGINT or SIGTERM: no more grace.
					s.kill()
					killT, killWait = timer(KillWait)
					continue
				}
				if s.cause == "" {
					s.causeSig = n
				}
				if graceT != nil || s.killed {
					s.signal(n) // forwarded, already escalating
					continue
				}
				escalate(record.ReasonInterrupted, n)
			default:
				// SIGUSR1/2: forwarded to the agent, never to bwrap (whose
				// default action would end the jail).
				if s.box != nil {
					s.signalGroup(n)
				}
			}
		case <-grace:
			s.kill()
			killT, killWait = timer(KillWait)
		case <-killWait:
			s.rec.KillWaitExpired = true
			s.rec.Warnings = append(s.rec.Warnings, fmt.Sprintf("bubblewrap (pid %d) did not exit within %v of SIGKILL; gave up waiting", s.cmd.Process.Pid, KillWait))
			return
		}
	}
}

// adopt takes the sandbox's pid from bwrap's status line, opens a pidfd on
// it and checks it, then releases the sandbox from --block-fd to start the
// agent: no agent code runs before the supervisor can signal its group.
func (s *supervisor) adopt(pid int, blockW *os.File) error {
	s.mu.Lock()
	s.childPID = pid
	s.mu.Unlock()
	box, err := openSandbox(s.spec.ProcRoot, pid, s.cmd.Process.Pid, s.spec.RunID)
	if err != nil && s.cause != "" {
		// Ending already (a signal at start-up killed bwrap): the
		// sandbox, re-parented or gone, is not this run's any more to
		// check. It stays blocked; the ending and the marker sweep end it.
		return nil
	}
	if err == nil {
		s.box = box
		if s.cause != "" {
			return nil // ending already: the sandbox stays blocked until killed
		}
		if s.cgroup != nil {
			// Into the cgroup v1 directories, before it runs anything of
			// the agent's: everything the agent starts descends from it.
			err = s.cgroup.join(pid)
		}
	}
	if errors.Is(err, errSandboxGone) {
		blockW.Close() // nothing runs: bwrap's exit tells the rest
		return nil
	}
	if err != nil {
		return err
	}
	if s.spec.Hold != nil {
		<-s.spec.Hold
	}
	// The sandbox may already have failed and closed its end: EPIPE then
	// (SIGPIPE is caught by agentjail run), and bwrap's exit tells the rest.
	blockW.Write([]byte{1})
	blockW.Close()
	return nil
}

// signal sends sig to the whole jail: its process group (and on a
// terminal of its own, the agent's session and foreground job), then each
// other process of it (signalOthers). Before that group exists (the
// sandbox calls setsid() after --block-fd) a termination signal goes to
// bwrap, whose death takes the sandbox with it (--die-with-parent).
func (s *supervisor) signal(sig syscall.Signal) {
	if s.box != nil {
		// Found before the groups are signalled: a process whose parent
		// dies of it is re-parented meanwhile, and new processes started
		// to handle it are the signalled ones' own.
		jail := s.jailProcs()
		defer procs.Release(jail)
		if groups, ok := s.signalGroup(sig); ok {
			s.signalOthers(sig, jail, groups)
			return
		}
	}
	if sig == syscall.SIGCONT {
		return
	}
	if err := s.cmd.Process.Signal(sig); err == nil {
		s.rec.SignalsSent = append(s.rec.SignalsSent, record.SignalEvent{Signal: procs.SignalName(sig), At: record.Time(time.Now()), Target: "bwrap"})
	}
}

// signalGroup signals the jail's process group and reports whether it
// existed, with the groups signalled. On a terminal of its own the agent
// leads a session apart: its group and the terminal's foreground job get
// the signal too.
func (s *supervisor) signalGroup(sig syscall.Signal) ([]int, bool) {
	never := procs.NewGuard(s.spec.ProcRoot)
	if never[s.box.pid] {
		return nil, false
	}
	now := record.Time(time.Now())
	var groups []int
	if s.tty != nil && sig != syscall.SIGKILL {
		// SIGKILL to the jail's group ends its pid namespace, and so
		// every process in it.
		var reached []string
		reached, groups = s.tty.signal(s.spec.ProcRoot, sig)
		for _, target := range reached {
			s.rec.SignalsSent = append(s.rec.SignalsSent, record.SignalEvent{Signal: procs.SignalName(sig), At: now, Target: target})
		}
	}
	if err := s.box.signalGroup(s.spec.ProcRoot, sig); err != nil {
		return nil, false
	}
	s.rec.SignalsSent = append(s.rec.SignalsSent, record.SignalEvent{Signal: procs.SignalName(sig), At: now, Target: "group"})
	return append(groups, s.box.pid), true
}

// jailProcs holds every process of the jail: those below the sandbox, the
// first process of its pid namespace, where every process of the jail
// descends from it (an orphan is re-parented to the namespace's init or to
// a subreaper in it, pid_namespaces(7)); without a pid namespace of its own
// (SharedPIDs), those below agentjail but bwrap, since agentjail is the
// subreaper of what the jail leaves. Only the pids handed out since the
// run began are looked at (procs.Since): no process of the jail is older.
func (s *supervisor) jailProcs() []procs.Held {
	root, rootFD := s.box.pid, s.box.pidfd
	if s.spec.SharedPIDs {
		root, rootFD = os.Getpid(), -1
	}
	held, err := procs.Below(s.spec.ProcRoot, root, rootFD, s.since)
	if err != nil {
		s.rec.Warnings = append(s.rec.Warnings, "find the jail's processes: "+err.Error())
	}
	return held
}

// signalOthers sends sig, through the pidfds that hold them, to those of
// the jail's processes in none of groups (those signalled as groups): a
// background job in a group of its own, a daemon that called setsid. A
// signal to a group reaches a process forked meanwhile (the kernel retries
// such a fork); these, one by one, reach those held.
func (s *supervisor) signalOthers(sig syscall.Signal, jail []procs.Held, groups []int) {
	n := 0
	for _, p := range jail {
		if p.PID == s.cmd.Process.Pid || slices.Contains(groups, p.PGID) {
			continue
		}
		if unix.PidfdSendSignal(p.FD, sig, nil, 0) == nil {
			n++
		}
	}
	if n > 0 {
		s.rec.SignalsSent = append(s.rec.SignalsSent, record.SignalEvent{Signal: procs.SignalName(sig), At: record.Time(time.Now()), Target: "others"})
	}
}

// attach starts the agent's terminal: its output read as the jail's
// stdout, the operator's input copied to it.
func (s *supervisor) attach(a *agentTerminal) {
	s.tty = a
	st := s.streams[0]
	st.src = a.master
	s.copying.Go(st.copy)
	if s.spec.Stdin == nil {
		return
	}
	s.escapes = make(chan byte, 8)
	s.typing = startTyping(s.spec.Stdin, a.master, s.spec.Tty.Escapes, s.spec.Tty.Foreground, s.act, func(cmd byte) {
		select {
		case s.escapes <- cmd:
		default:
		}
	}, func() { a.signal(s.spec.ProcRoot, syscall.SIGCONT) })
}

// endTty closes the agent's terminal once its output is read, and records
// what passed through it.
func (s *supervisor) endTty() {
	if s.spec.Tty == nil {
		return
	}
	s.rec.IO, s.rec.Terminal = record.IOPty, s.terminalRecord()
	if s.tty == nil {
		// One attached after the jail had ended is not used.
		select {
		case a := <-s.spec.Tty.attached:
			if a.err == nil {
				a.master.Close()
				unix.Close(a.leader)
			}
		default:
		}
		return
	}
	s.tty.master.Close()
	unix.Close(s.tty.leader)
}

// kill sends SIGKILL to the group and to bwrap: the sandbox's death tears
// the pid namespace down (pid_namespaces(7)).
func (s *supervisor) kill() {
	s.killed = true
	grouped := false
	if s.box != nil {
		_, grouped = s.signalGroup(syscall.SIGKILL)
	}
	if !grouped {
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err == nil {
			s.rec.SignalsSent = append(s.rec.SignalsSent, record.SignalEvent{Signal: "SIGKILL", At: record.Time(time.Now()), Target: "bwrap"})
		}
	}
	if s.box != nil {
		// The sandbox itself, in case it had not formed its group yet.
		unix.PidfdSendSignal(s.box.pidfd, unix.SIGKILL, nil, 0)
	}
}

// readStatus reads bwrap's --json-status-fd: the child-pid line first,
// the exit-code line after a successful exec.
func (s *supervisor) readStatus(r io.Reader, childPIDs chan<- int, done chan<- struct{}) {
	defer close(done)
	dec := json.NewDecoder(r)
	for {
		var line status
		if dec.Decode(&line) != nil {
			return
		}
		if line.ChildPID != nil {
			select {
			case childPIDs <- *line.ChildPID:
			default:
			}
		}
		if line.ExitCode != nil {
			s.mu.Lock()
			s.exitCode = line.ExitCode
			s.mu.Unlock()
		}
	}
}

// readControl reads the exec stage's control channel until its end,
// handing each message to handle (and answering it once handled, when the
// stage awaits an answer), and sends the warnings it has on done.
// A message the reader refused is a warning and the next is read; the
// channel's end (the stage exec'd or died) or the deadline set once the
// jail has ended stop it.
func readControl(c *os.File, handle func(execstage.Message, []*os.File), done chan<- []string) {
	var warnings []string
	defer func() { done <- warnings }()
	for {
		m, files, err := execstage.ReadControl(c)
		switch {
		case err == nil:
			handle(m, files)
			if m.Await {
				execstage.Answer(c)
			}
		case errors.Is(err, execstage.ErrBadMessage):
			warnings = append(warnings, "exec stage: "+err.Error())
		case err == io.EOF || errors.Is(err, os.ErrDeadlineExceeded):
			return
		default:
			warnings = append(warnings, "exec stage: "+err.Error())
			return
		}
	}
}

// status is the live view `agentjail ps` shows.
func (s *supervisor) status() live.Status {
	s.mu.Lock()
	child := s.childPID
	s.mu.Unlock()
	st := live.Status{RunID: s.spec.RunID, Profile: s.rec.Profile, PID: os.Getpid(), ChildPID: child,
		StartedAt: s.rec.StartedAt, IdleMS: s.act.idle().Milliseconds()}
	st.Bytes.Stdout, st.Bytes.Stderr = s.streams[0].n.Load(), s.streams[1].n.Load()
	return st
}

func (s *supervisor) endCgroup() {
	if s.cgroup == nil {
		return
	}
	left, err := s.cgroup.end(s.spec.ProcRoot, 5*time.Second)
	s.cgroup = nil
	s.addOrphans(left)
	if err != nil {
		s.rec.Warnings = append(s.rec.Warnings, err.Error())
	}
}

// sweep kills those of the processes found carrying the run's marker
// that still run, and lists them as orphans.
func (s *supervisor) sweep(found []procs.Proc) {
	killed, err := procs.KillVerified(s.spec.ProcRoot, s.spec.RunID, found)
	if err != nil {
		s.rec.Warnings = append(s.rec.Warnings, "marker sweep: "+err.Error())
	}
	s.addOrphans(killed)
	if left := procs.WaitGone(s.spec.ProcRoot, killed, 5*time.Second); len(left) > 0 {
		s.rec.Warnings = append(s.rec.Warnings, fmt.Sprintf("%d processes carrying the run's marker were still running 5s after SIGKILL", len(left)))
	}
}

func (s *supervisor) addOrphans(found []procs.Proc) {
	for _, p := range found {
		if p.PID == s.cmd.Process.Pid || slices.ContainsFunc(s.rec.Orphans, func(o record.Orphan) bool { return o.PID == p.PID }) {
			continue
		}
		s.rec.Orphans = append(s.rec.Orphans, record.Orphan{PID: p.PID, PPID: p.PPID, Cmd: p.Cmd})
	}
}

func (s *supervisor) finishOutput() {
	for i, st := range s.streams {
		head, tail, omitted := st.excerpt()
		ex := record.ExcerptOf(head, tail, omitted, s.spec.Secrets, s.spec.Hidden)
		if i == 0 {
			s.rec.Bytes.Stdout, s.rec.Excerpt.Stdout = st.n.Load(), ex
		} else {
			s.rec.Bytes.Stderr, s.rec.Excerpt.Stderr = st.n.Load(), ex
			last := tail
			if len(last) == 0 {
				last = head
			}
			s.midLine = len(last) > 0 && last[len(last)-1] != '\n'
		}
		dstErr, logErr := st.errs()
		if logErr != nil {
			s.rec.Warnings = append(s.rec.Warnings, "log: "+logErr.Error())
		}
		if dstErr != nil {
			s.rec.Warnings = append(s.rec.Warnings, fmt.Sprintf("agentjail's %s: %v; closed the jail's end", streamNames[i], dstErr))
		}
	}
}

func (s *supervisor) setupFailed(err error) error {
	s.rec.Reason, s.rec.ExitCode, s.rec.Error = record.ReasonSetupFailed, record.ExitSetup, err.Error()
	return err
}

// readReport reads the exec stage's report (execstage.ReadReport): the
// rlimits it applied go into the record, and those it could not raise
// into its degradations.
func (s *supervisor) readReport(report []byte) (*record.ExecFailure, error) {
	res := execstage.ReadReport(report)
	for _, r := range res.Rlimits {
		s.rec.Limits.Rlimits[r.Rlimit] = r.Applied
		if r.Applied != r.Asked {
			s.rec.Degradations = append(s.rec.Degradations, record.Note{What: "rlimit." + r.Rlimit,
				Detail: fmt.Sprintf("%s asked, %s applied: the hard limit agentjail inherited, which it may not raise without CAP_SYS_RESOURCE", r.Asked, r.Applied)})
		}
	}
	return res.ExecFailure, res.Err
}

// outcome decides the reason and the exit code. setup_failed wins over
// everything, then the first cause agentjail acted on (a timeout, a stop,
// a signal it received), then what the agent did.
func (s *supervisor) outcome(report []byte) error {
	s.mu.Lock()
	code := s.exitCode
	s.mu.Unlock()
	fail, stageErr := s.readReport(report)
	if code != nil && fail == nil {
		s.rec.AgentExitCode = code
		if n := *code - 128; n > 0 && n < 65 {
			name := procs.SignalName(syscall.Signal(n))
			s.rec.AgentSignal, s.rec.AgentSignalAmbiguous = &name, true
		}
	}
	r := &s.rec
	switch {
	case s.setupErr != nil:
		return s.setupFailed(s.setupErr)
	case stageErr != nil && s.cause == "":
		return s.setupFailed(stageErr)
	case s.cause == record.ReasonInterrupted:
		name := procs.SignalName(s.causeSig)
		r.Reason, r.ExitCode, r.Signal = s.cause, 128+int(s.causeSig), &name
	case s.cause == record.ReasonPidsLimit || s.cause == record.ReasonMemoryLimit:
		r.Reason, r.ExitCode = s.cause, record.ExitLimit
	case s.cause != "":
		r.Reason, r.ExitCode = s.cause, record.ExitTimeout
	case fail != nil:
		r.Reason, r.ExitCode, r.ExecFailure = record.ReasonExecFailed, fail.ExitCode(), fail
		r.AgentExitCode = code
	case code != nil:
		r.Reason, r.ExitCode = record.ReasonExit, *code
		if r.AgentSignal != nil {
			r.Reason, r.Signal = record.ReasonSignal, r.AgentSignal
		}
	case s.waitState != nil && s.waitState.Signaled():
		// bwrap itself was killed, not by us.
		name := procs.SignalName(s.waitState.Signal())
		r.Reason, r.ExitCode, r.Signal = record.ReasonSignal, 128+int(s.waitState.Signal()), &name
	default:
		exit := -1
		if s.waitState != nil {
			exit = s.waitState.ExitStatus()
		}
		return s.setupFailed(fmt.Errorf("bubblewrap could not set up the jail (exit %d); its message is above", exit))
	}
	return nil
}

package record

import (
	"encoding/json"
	"fmt"
	"syscall"
	"time"
)

// Reasons a run ends with: the record's `reason`.
const (
	ReasonExit        = "exit"         // the agent's own exit code
	ReasonSignal      = "signal"       // the agent died by a signal: 128+n
	ReasonExecFailed  = "exec_failed"  // 126/127
	ReasonWallTimeout = "wall_timeout" // 124
	ReasonIdleTimeout = "idle_timeout" // 124
	ReasonStopped     = "stopped"      // 124: agentjail stop
	ReasonInterrupted = "interrupted"  // 128+n: a signal agentjail received
	ReasonSetupFailed = "setup_failed" // 125
	ReasonViolation   = "violation"    // 123: the post-run checks found the policy broken
	ReasonPidsLimit   = "pids_limit"   // 122: a fork refused at limits.pids
	ReasonMemoryLimit = "memory_limit" // 122: an OOM kill at limits.memory
)

// What a violation note names.
const (
	ViolationProtected = "protected" // a protected path appeared, changed or went away
	ViolationSetID     = "setid"     // set-user/group-id bits the run set (stripped)
	ViolationDevice    = "device"    // a device node the run made (removed)
	ViolationUnchecked = "unchecked" // what the checks after the run could not reach
)

// Exit codes of agentjail's own. The jailed command may exit with any of
// them too: the record's reason is what tells them apart.
const (
	ExitLimit     = 122 // the jail reached limits.pids or limits.memory
	ExitViolation = 123 // the post-run checks found a policy violation
	ExitTimeout   = 124 // a timeout or a stop ended the run
	ExitSetup     = 125 // agentjail's own failure; the command never ran
)

// Version is the record's contract, in RecordVersion: 2 since a run may
// have a terminal of its own (io, terminal), where stdout's bytes and
// excerpt hold the terminal's one stream, and since the record has
// `agent` (one object for every agent kind); records without the field
// are 1. A version changes when a field changes meaning or goes; fields
// are added without one.
const Version = 2

// Record is the run record (--record FILE): one JSON object, a stable
// contract whose fields are added, never renamed (docs/supervision.md).
type Record struct {
	// RecordVersion is Version (Marshal sets it).
	RecordVersion int      `json:"record_version"`
	RunID         string   `json:"run_id"`
	Profile       string   `json:"profile"`
	Argv          []string `json:"argv"`
	User          *User    `json:"user"`
	StartedAt     Time     `json:"started_at"`
	EndedAt       Time     `json:"ended_at"`
	DurationMS    int64    `json:"duration_ms"`
	Reason        string   `json:"reason"`
	// ExitCode is agentjail's own exit code.
	ExitCode int `json:"exit_code"`
	// Signal is the signal behind the reason: the agent's fatal signal
	// (reason signal) or the one agentjail received (reason interrupted).
	Signal *string `json:"signal"`
	// AgentExitCode is the agent's status as bwrap reports it (128+n after
	// death by signal n); nil when the agent never ran or bwrap could not
	// say (killed with the jail's cgroup at a pids cap). AgentSignal names n when the code is above 128; bwrap reports
	// `exit 143` and death by SIGTERM alike, so AgentSignalAmbiguous is then
	// true.
	AgentExitCode        *int    `json:"agent_exit_code"`
	AgentSignal          *string `json:"agent_signal"`
	AgentSignalAmbiguous bool    `json:"agent_signal_ambiguous"`
	// ExecFailure is set for reason exec_failed.
	ExecFailure *ExecFailure `json:"exec_failure,omitempty"`

	SignalsSent     []SignalEvent `json:"signals_sent"`
	SignalsReceived []SignalEvent `json:"signals_received"`
	// KillWaitExpired: the jail did not end within the bounded wait after
	// SIGKILL; agentjail gave up waiting.
	KillWaitExpired bool `json:"kill_wait_expired"`
	// Orphans are processes still carrying the run's marker after the jail
	// ended; each was killed.
	Orphans []Orphan `json:"orphans"`
	Bytes   Bytes    `json:"bytes"`
	Excerpt Excerpts `json:"excerpt"`
	// IO is how the jail's standard streams were connected: IOPipes, or
	// IOPty (a terminal of the agent's own: Bytes.Stdout and
	// Excerpt.Stdout are the terminal's one stream, stdout and stderr
	// merged, with \r\n line ends and the escape sequences as the agent
	// wrote them; stderr holds bubblewrap's and the exec stage's messages).
	IO string `json:"io"`
	// Terminal is what passed between the agent and the operator's
	// terminal; nil when agentjail's output went to no terminal and the
	// agent had none of its own.
	Terminal *Terminal `json:"terminal"`

	BwrapVersion string `json:"bwrap_version"`
	Limits       Limits `json:"limits"`
	Degradations []Note `json:"degradations"`
	Violations   []Note `json:"violations"`
	// ViolationsDropped counts the violations past the first
	// MaxViolations, which are not listed; ViolationCounts counts them
	// all by kind (an agent can make 100 000 of them).
	ViolationsDropped int            `json:"violations_dropped"`
	ViolationCounts   map[string]int `json:"violation_counts"`
	// Warnings are other things worth knowing (a log that could not be
	// written, output still held open after the jail ended).
	Warnings []string `json:"warnings"`
	// Claude is what agentjail learnt about a Claude Code run: its result
	// (json and stream-json output), its login, its transcripts. Nil when
	// the command is not claude and the run's Claude Code directory held
	// nothing of note.
	Claude *Claude `json:"claude"`
	// Agent is what agentjail learnt about a run of an agent it knows
	// (claude, codex: the command's program), the same fields for each;
	// nil for other commands. For claude it repeats Claude, which stays
	// for readers of version 1.
	Agent *Agent `json:"agent"`
	// Network is the jail's network: its mode and, in proxy mode, what
	// went through the broker. Null for a run that never started.
	Network *Network `json:"network"`
	// Error is agentjail's message for reason setup_failed.
	Error string `json:"error,omitempty"`
}

// Orphan is a process found after the jail had ended (in the run's cgroup
// or carrying its marker); each was killed.
type Orphan struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Cmd  string `json:"cmd"`
}

// ExecFailure is what the exec stage reports when the agent cannot start.
type ExecFailure struct {
	Path  string `json:"path"`
	Errno int    `json:"errno"`
}

func (e *ExecFailure) Error() string {
	return fmt.Sprintf("cannot execute %s inside the jail: %s", e.Path, syscall.Errno(e.Errno).Error())
}

// ExitCode is 127 when the command was not found, 126 when it was found but
// could not be executed, as in POSIX shells.
func (e *ExecFailure) ExitCode() int {
	if syscall.Errno(e.Errno) == syscall.ENOENT {
		return 127
	}
	return 126
}

// User is the run user.
type User struct {
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Name string `json:"name"`
}

// SignalEvent is one signal sent to the jail or received by agentjail.
type SignalEvent struct {
	Signal string `json:"signal"`
	At     Time   `json:"at"`
	// Target is "group" (the jail's process group), "bwrap" (before the
	// sandbox existed), "session" and "foreground" (the agent's terminal's
	// session and foreground job), "others" (every other process of the
	// jail, one by one) or, for received signals, empty.
	Target string `json:"target,omitempty"`
}

// What Record.IO says.
const (
	IOPipes = "pipes"
	IOPty   = "pty"
)

// Terminal is the record's account of a run's terminal.
type Terminal struct {
	// Rows and Cols are the agent's terminal's size at the start;
	// Resizes counts the sizes given to it since (SIGWINCH).
	Rows    int `json:"rows"`
	Cols    int `json:"cols"`
	Resizes int `json:"resizes"`
	// InputBytes counts what the operator typed; InputDropped what of it
	// the agent left no room for (a full queue, as a line discipline
	// drops input).
	InputBytes   int64 `json:"input_bytes"`
	InputDropped int64 `json:"input_dropped"`
	// EndedByEscape: the operator typed ~. (reason stopped).
	EndedByEscape bool `json:"ended_by_escape"`
	// StringsDropped counts the control strings (OSC 52 and the other
	// OSCs not allowed, DCS, APC, PM, SOS) kept off the operator's
	// terminal; ClipboardAllowed: --allow-clipboard let OSC 52 through.
	StringsDropped   int  `json:"strings_dropped"`
	ClipboardAllowed bool `json:"clipboard_allowed"`
	// ScreenReset: agentjail wrote its screen reset after the output (the
	// output held escape sequences).
	ScreenReset bool `json:"screen_reset"`
}

// Bytes counts every byte of each stream.
type Bytes struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

// Excerpts are the kept heads and tails.
type Excerpts struct {
	Stdout Excerpt `json:"stdout"`
	Stderr Excerpt `json:"stderr"`
}

// Excerpt is the head and tail of one stream and the bytes left out
// between them. Invalid UTF-8 shows as U+FFFD; the byte counts are exact.
type Excerpt struct {
	Head         string `json:"head"`
	Tail         string `json:"tail"`
	OmittedBytes int64  `json:"omitted_bytes"`
}

// Note is one degradation or violation: what (a short stable name) and why.
type Note struct {
	What   string `json:"what"`
	Detail string `json:"detail"`
}

// Limits are the limits the run had.
type Limits struct {
	WallMS     int64             `json:"wall_ms"`
	IdleMS     int64             `json:"idle_ms"`
	GraceMS    int64             `json:"grace_ms"`
	KillWaitMS int64             `json:"kill_wait_ms"`
	OutputHead int               `json:"output_head"`
	OutputTail int               `json:"output_tail"`
	Rlimits    map[string]string `json:"rlimits"`
	// Cgroup is the run's cgroup v2 directory, "" when none could be made.
	Cgroup string `json:"cgroup"`
	// CgroupV1 maps a controller to the run's cgroup v1 directory, where
	// the host keeps the controller on cgroup v1.
	CgroupV1  map[string]string `json:"cgroup_v1"`
	PidsMax   *int64            `json:"pids_max"`
	MemoryMax *int64            `json:"memory_max"`
	SwapMax   *int64            `json:"swap_max"`
	// PidsRefused counts forks refused at pids_max (pids.events "max"),
	// OOMKills processes the kernel killed at memory_max; PidsPeak and
	// MemoryPeak are the most the cgroup held. Each is nil where no
	// cgroup counted it.
	PidsRefused *int64 `json:"pids_refused"`
	OOMKills    *int64 `json:"oom_kills"`
	PidsPeak    *int64 `json:"pids_peak"`
	MemoryPeak  *int64 `json:"memory_peak"`
}

// Time is a time that marshals as RFC 3339 with milliseconds.
type Time time.Time

// TimeLayout is RFC 3339 with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	v, err := time.Parse(`"`+TimeLayout+`"`, string(b))
	*t = Time(v)
	return err
}

// Finish sets the end time and the duration.
func (r *Record) Finish(end time.Time) {
	r.EndedAt = Time(end)
	r.DurationMS = end.Sub(time.Time(r.StartedAt)).Milliseconds()
}

// normalize turns nil lists into empty ones, so readers see [] not null.
func (r *Record) normalize() {
	r.RecordVersion = Version
	if r.Agent != nil && r.Agent.Transcripts == nil {
		r.Agent.Transcripts = []string{}
	}
	if r.IO == "" {
		r.IO = IOPipes
	}
	for _, l := range []*[]SignalEvent{&r.SignalsSent, &r.SignalsReceived} {
		if *l == nil {
			*l = []SignalEvent{}
		}
	}
	for _, l := range []*[]Note{&r.Degradations, &r.Violations} {
		if *l == nil {
			*l = []Note{}
		}
	}
	if r.Orphans == nil {
		r.Orphans = []Orphan{}
	}
	if r.ViolationCounts == nil {
		r.ViolationCounts = map[string]int{}
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.Argv == nil {
		r.Argv = []string{}
	}
	if r.Limits.Rlimits == nil {
		r.Limits.Rlimits = map[string]string{}
	}
	if r.Limits.CgroupV1 == nil {
		r.Limits.CgroupV1 = map[string]string{}
	}
}

// Marshal is the record as written: indented JSON with a final newline,
// every list [] rather than null.
func (r *Record) Marshal() ([]byte, error) {
	r.normalize()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// MaxViolations is how many violations a record lists.
const MaxViolations = 1000

// Violate adds violations to the record: any one ends the run with reason
// violation and exit 123, unless the setup had failed (which wins). Past
// MaxViolations they are only counted.
func (r *Record) Violate(notes ...Note) {
	if len(notes) == 0 {
		return
	}
	if r.ViolationCounts == nil {
		r.ViolationCounts = map[string]int{}
	}
	for _, n := range notes {
		r.ViolationCounts[n.What]++
		if len(r.Violations) < MaxViolations {
			r.Violations = append(r.Violations, n)
		} else {
			r.ViolationsDropped++
		}
	}
	if r.Reason != ReasonSetupFailed {
		r.Reason, r.ExitCode = ReasonViolation, ExitViolation
	}
}

package supervise

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/hostfs"
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
	ReasonViolation   = "violation"    // 125: reserved for the hardening issue
	ReasonPidsLimit   = "pids_limit"   // 122: a fork refused at limits.pids
	ReasonMemoryLimit = "memory_limit" // 122: an OOM kill at limits.memory
)

// Exit codes of agentjail's own.
const (
	ExitTimeout = 124 // a timeout or a stop ended the run
	ExitSetup   = 125 // agentjail's own failure; the command never ran
	ExitLimit   = 122 // the jail reached limits.pids or limits.memory
)

// Record is the run record (--record FILE): one JSON object, a stable
// contract whose fields are added, never renamed. README.md documents it.
type Record struct {
	RunID      string   `json:"run_id"`
	Profile    string   `json:"profile"`
	Argv       []string `json:"argv"`
	User       *User    `json:"user"`
	StartedAt  Time     `json:"started_at"`
	EndedAt    Time     `json:"ended_at"`
	DurationMS int64    `json:"duration_ms"`
	Reason     string   `json:"reason"`
	// ExitCode is agentjail's own exit code.
	ExitCode int `json:"exit_code"`
	// Signal is the signal behind the reason: the agent's fatal signal
	// (reason signal) or the one agentjail received (reason interrupted).
	Signal *string `json:"signal"`
	// AgentExitCode is the agent's status as bwrap reports it (128+n after
	// death by signal n); nil when the agent never ran or bwrap could not
	// say. AgentSignal names n when the code is above 128; bwrap reports
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
	Orphans []Proc   `json:"orphans"`
	Bytes   Bytes    `json:"bytes"`
	Excerpt Excerpts `json:"excerpt"`

	BwrapVersion string       `json:"bwrap_version"`
	Limits       RecordLimits `json:"limits"`
	Degradations []Note       `json:"degradations"`
	Violations   []Note       `json:"violations"`
	// Warnings are other things worth knowing (a log that could not be
	// written, output still held open after the jail ended).
	Warnings []string `json:"warnings"`
	// Claude is what agentjail learnt about a Claude Code run: its result
	// (json and stream-json output), its login, its transcripts. Nil when
	// the command is not claude and the run's Claude Code directory held
	// nothing of note.
	Claude *claude.Summary `json:"claude"`
	// Error is agentjail's message for reason setup_failed.
	Error string `json:"error,omitempty"`

	stderrMidLine bool    // the agent's last stderr byte was not a newline
	abandoned     [2]bool // agentjail gave up writing to its stdout, stderr
}

// Abandoned reports whether agentjail gave up delivering the jail's output
// to its own stdout (i 0) or stderr (i 1): a write there would block.
func (r Record) Abandoned(i int) bool { return r.abandoned[i] }

// StderrMidLine reports whether the jail's stderr ended in the middle of a
// line: a message printed after the run must start on a line of its own.
func (r Record) StderrMidLine() bool { return r.stderrMidLine }

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
	// sandbox existed) or, for received signals, empty.
	Target string `json:"target,omitempty"`
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

// RecordLimits are the limits the run had.
type RecordLimits struct {
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
		r.Orphans = []Proc{}
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

// WriteFile writes the record into dir as name, atomically
// (hostfs.Dir.Replace): a reader sees either no record or a whole one, and
// whatever was at name (a link, a file the agent put there) is replaced,
// never followed.
func (r *Record) WriteFile(dir *hostfs.Dir, name string) error {
	r.normalize()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := dir.Replace(name, data); err != nil {
		return fmt.Errorf("write the run record %s: %w", filepath.Join(dir.Path, name), err)
	}
	return nil
}

// Redact replaces every secret in s by "[redacted]". Values shorter than
// MinSecret bytes are not looked for: they would match ordinary text.
func Redact(s string, secrets []string) string {
	s, _ = RedactExcerpt(s, "", 0, secrets)
	return s
}

// MinSecret is the length below which an environment value is not
// redacted (README.md, The run record).
const MinSecret = 6

// minShown is how much of a secret cut by the omitted bytes must show for
// it to be masked: fewer bytes reveal less than a value too short to be
// looked for at all, and are too common at a cut to mask without
// mangling ordinary text.
const minShown = MinSecret / 2

// RedactExcerpt redacts head and tail, the kept ends of one text of which
// omitted bytes between them were left out (tail may be empty: only a head
// kept). Every secret in either is masked; so is one that straddles them
// when nothing was left out. A secret the omitted bytes cut shows only in
// part, and is masked too: the end of the head that begins one, the start
// of the tail that ends one, when at least minShown bytes of it show.
// Each maximal masked run becomes one "[redacted]".
func RedactExcerpt(head, tail string, omitted int64, secrets []string) (string, string) {
	text := head + tail
	var masked []bool // lazily: most excerpts hold no secret
	mark := func(from, to int) {
		if masked == nil {
			masked = make([]bool, len(text))
		}
		for i := from; i < to; i++ {
			masked[i] = true
		}
	}
	for _, v := range secrets {
		if len(v) < MinSecret {
			continue
		}
		for i := 0; ; i++ {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			i += j
			mark(i, i+len(v))
		}
		if omitted == 0 {
			continue
		}
		// The longest end of head that begins v, and the longest start of
		// tail that ends it.
		for i := max(0, len(head)-len(v)+1); i < len(head); i++ {
			if strings.HasPrefix(v, head[i:]) {
				if len(head)-i >= minShown {
					mark(i, len(head))
				}
				break
			}
		}
		for k := min(len(tail), len(v)-1); k >= minShown; k-- {
			if strings.HasSuffix(v, tail[:k]) {
				mark(len(head), len(head)+k)
				break
			}
		}
	}
	if masked == nil {
		return head, tail
	}
	return masking(head, masked[:len(head)]), masking(tail, masked[len(head):])
}

// masking replaces each run of masked bytes of s by "[redacted]".
func masking(s string, masked []bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !masked[i] {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString("[redacted]")
		for i+1 < len(s) && masked[i+1] {
			i++
		}
	}
	return b.String()
}

// excerptOf renders one stream's excerpt for the record: redacted first,
// on the bytes as written, then made valid UTF-8.
func excerptOf(head, tail []byte, omitted int64, secrets []string) Excerpt {
	h, t := RedactExcerpt(string(head), string(tail), omitted, secrets)
	return Excerpt{
		Head:         strings.ToValidUTF8(h, "\uFFFD"),
		Tail:         strings.ToValidUTF8(t, "\uFFFD"),
		OmittedBytes: omitted,
	}
}

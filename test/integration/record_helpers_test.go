package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/procs"
)

// runRecord is the run record as README.md documents it. Decoding is
// strict: a field added to the record must be added here too, and one
// renamed fails every test that reads a record.
type runRecord struct {
	RecordVersion int      `json:"record_version"`
	RunID         string   `json:"run_id"`
	Profile       string   `json:"profile"`
	Argv          []string `json:"argv"`
	User          *struct {
		UID  int    `json:"uid"`
		GID  int    `json:"gid"`
		Name string `json:"name"`
	} `json:"user"`
	StartedAt            string  `json:"started_at"`
	EndedAt              string  `json:"ended_at"`
	DurationMS           int64   `json:"duration_ms"`
	Reason               string  `json:"reason"`
	ExitCode             int     `json:"exit_code"`
	Signal               *string `json:"signal"`
	AgentExitCode        *int    `json:"agent_exit_code"`
	AgentSignal          *string `json:"agent_signal"`
	AgentSignalAmbiguous bool    `json:"agent_signal_ambiguous"`
	ExecFailure          *struct {
		Path  string `json:"path"`
		Errno int    `json:"errno"`
	} `json:"exec_failure"`
	SignalsSent     []signalEvent `json:"signals_sent"`
	SignalsReceived []signalEvent `json:"signals_received"`
	KillWaitExpired bool          `json:"kill_wait_expired"`
	Orphans         []orphan      `json:"orphans"`
	Bytes           struct {
		Stdout int64 `json:"stdout"`
		Stderr int64 `json:"stderr"`
	} `json:"bytes"`
	Excerpt struct {
		Stdout excerpt `json:"stdout"`
		Stderr excerpt `json:"stderr"`
	} `json:"excerpt"`
	IO       string `json:"io"`
	Terminal *struct {
		Rows             int   `json:"rows"`
		Cols             int   `json:"cols"`
		Resizes          int   `json:"resizes"`
		InputBytes       int64 `json:"input_bytes"`
		InputDropped     int64 `json:"input_dropped"`
		EndedByEscape    bool  `json:"ended_by_escape"`
		StringsDropped   int   `json:"strings_dropped"`
		ClipboardAllowed bool  `json:"clipboard_allowed"`
		ScreenReset      bool  `json:"screen_reset"`
	} `json:"terminal"`
	BwrapVersion string `json:"bwrap_version"`
	Limits       struct {
		WallMS      int64             `json:"wall_ms"`
		IdleMS      int64             `json:"idle_ms"`
		GraceMS     int64             `json:"grace_ms"`
		KillWaitMS  int64             `json:"kill_wait_ms"`
		OutputHead  int64             `json:"output_head"`
		OutputTail  int64             `json:"output_tail"`
		Rlimits     map[string]string `json:"rlimits"`
		Cgroup      string            `json:"cgroup"`
		CgroupV1    map[string]string `json:"cgroup_v1"`
		PidsMax     *int64            `json:"pids_max"`
		MemoryMax   *int64            `json:"memory_max"`
		SwapMax     *int64            `json:"swap_max"`
		PidsRefused *int64            `json:"pids_refused"`
		OOMKills    *int64            `json:"oom_kills"`
		PidsPeak    *int64            `json:"pids_peak"`
		MemoryPeak  *int64            `json:"memory_peak"`
	} `json:"limits"`
	Degradations      []note         `json:"degradations"`
	Violations        []note         `json:"violations"`
	ViolationsDropped int            `json:"violations_dropped"`
	ViolationCounts   map[string]int `json:"violation_counts"`
	Warnings          []string       `json:"warnings"`
	Claude            *claudeRecord  `json:"claude"`
	Agent             *agentRecord   `json:"agent"`
	Network           *netRecord     `json:"network"` // network_test.go
	Error             string         `json:"error"`
}

// agentRecord is the record's `agent` object (record_version 2).
type agentRecord struct {
	Kind           string          `json:"kind"`
	OutputFormat   string          `json:"output_format"`
	SessionID      *string         `json:"session_id"`
	IsError        *bool           `json:"is_error"`
	Error          *string         `json:"error"`
	Result         *string         `json:"result"`
	ResultBytes    int             `json:"result_bytes"`
	Usage          json.RawMessage `json:"usage"`
	ParseError     *string         `json:"parse_error"`
	Subtype        *string         `json:"subtype"`
	NumTurns       *int            `json:"num_turns"`
	TotalCostUSD   *float64        `json:"total_cost_usd"`
	APIErrorStatus *int            `json:"api_error_status"`
	Commands       *struct {
		Run           int `json:"run"`
		Failed        int `json:"failed"`
		EventsDropped int `json:"events_dropped"`
	} `json:"commands"`
	Credentials *struct {
		Source    string  `json:"source"`
		Copied    bool    `json:"copied"`
		ExpiresAt *string `json:"expires_at"`
		Detail    string  `json:"detail"`
	} `json:"credentials"`
	Transcripts []string `json:"transcripts"`
}

// claudeRecord is the record's `claude` object.
type claudeRecord struct {
	OutputFormat   string          `json:"output_format"`
	SessionID      *string         `json:"session_id"`
	Subtype        *string         `json:"subtype"`
	IsError        *bool           `json:"is_error"`
	NumTurns       *int            `json:"num_turns"`
	TotalCostUSD   *float64        `json:"total_cost_usd"`
	Usage          json.RawMessage `json:"usage"`
	APIErrorStatus *int            `json:"api_error_status"`
	Result         *string         `json:"result"`
	ResultBytes    int             `json:"result_bytes"`
	ParseError     *string         `json:"parse_error"`
	Credentials    *struct {
		Source      string  `json:"source"`
		Copied      bool    `json:"copied"`
		ExpiresAt   *string `json:"expires_at"`
		Refreshed   bool    `json:"refreshed"`
		WriteBack   bool    `json:"write_back"`
		WrittenBack bool    `json:"written_back"`
		Detail      string  `json:"detail"`
	} `json:"credentials"`
	Transcripts []string `json:"transcripts"`
}

type signalEvent struct {
	Signal string `json:"signal"`
	At     string `json:"at"`
	Target string `json:"target"`
}

type excerpt struct {
	Head         string `json:"head"`
	Tail         string `json:"tail"`
	OmittedBytes int64  `json:"omitted_bytes"`
}

type note struct {
	What   string `json:"what"`
	Detail string `json:"detail"`
}

// recordKeys must be present in every record, null or empty if need be.
var recordKeys = []string{"record_version", "io", "terminal", "run_id", "profile", "argv", "user", "started_at", "ended_at", "duration_ms",
	"reason", "exit_code", "signal", "agent_exit_code", "agent_signal", "signals_sent", "orphans", "bytes",
	"excerpt", "bwrap_version", "limits", "degradations", "violations", "violations_dropped", "violation_counts"}

const recordTime = "2006-01-02T15:04:05.000Z07:00"

// readRecord reads and checks a run record: valid JSON, strictly the
// documented fields, every required key, RFC 3339 times with milliseconds,
// signal names, and agentjail's exit code agreeing with the process's.
func readRecord(t *testing.T, path string, code int) runRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no record: %v", err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatalf("the record is not JSON: %v\n%s", err, data)
	}
	for _, k := range recordKeys {
		if _, ok := keys[k]; !ok {
			t.Errorf("the record lacks %q", k)
		}
	}
	var rec runRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("the record does not match the documented schema: %v\n%s", err, data)
	}
	if rec.RecordVersion != 2 || rec.IO != "pipes" && rec.IO != "pty" {
		t.Errorf("record_version %d, io %q", rec.RecordVersion, rec.IO)
	}
	for _, ts := range []string{rec.StartedAt, rec.EndedAt} {
		if _, err := time.Parse(recordTime, ts); err != nil {
			t.Errorf("time %q is not RFC 3339 with milliseconds", ts)
		}
	}
	for _, s := range append(rec.SignalsSent, rec.SignalsReceived...) {
		if !strings.HasPrefix(s.Signal, "SIG") {
			t.Errorf("signal %q is not a name", s.Signal)
		}
		if _, err := time.Parse(recordTime, s.At); err != nil {
			t.Errorf("signal time %q", s.At)
		}
	}
	if rec.ExitCode != code {
		t.Errorf("record exit_code %d, agentjail exited %d", rec.ExitCode, code)
	}
	if rec.RecordVersion != 2 {
		t.Errorf("record_version %d, want 2", rec.RecordVersion)
	}
	if len(rec.RunID) < 20 || rec.Reason == "" {
		t.Errorf("run_id %q reason %q", rec.RunID, rec.Reason)
	}
	return rec
}

// recordPath is a fresh record file name in a private directory.
func recordPath(t *testing.T) string { return filepath.Join(t.TempDir(), "record.json") }

// sent lists the names of the signals a record says were sent.
func (r runRecord) sent() []string {
	var out []string
	for _, s := range r.SignalsSent {
		out = append(out, s.Signal)
	}
	return out
}

// background is an agentjail run left running while the test acts on it.
type background struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	exited         chan struct{}
	code           int
}

// start runs agentjail with args in the background; wait collects it.
func start(t *testing.T, env []string, args ...string) *background {
	t.Helper()
	return startCmd(t, exec.Command(agentjail, args...), env)
}

// startGroup is start with agentjail leading a process group of its own,
// as a shell's foreground job does.
func startGroup(t *testing.T, args ...string) *background {
	t.Helper()
	cmd := exec.Command(agentjail, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return startCmd(t, cmd, nil)
}

func startCmd(t *testing.T, cmd *exec.Cmd, env []string) *background {
	t.Helper()
	b := &background{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{}), cmd: cmd}
	b.cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	b.cmd.Dir = "/"
	b.cmd.Stdout, b.cmd.Stderr = b.stdout, b.stderr
	// What agentjail leaves when it is killed (nothing ends its jail then)
	// could hold its stdout or stderr for ever: Wait gives up on them.
	b.cmd.WaitDelay = 10 * time.Second
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b.cmd.Wait()
		b.code = b.cmd.ProcessState.ExitCode()
		if ws, ok := b.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			b.code = 128 + int(ws.Signal())
		}
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		select {
		case <-b.exited:
		case <-time.After(time.Minute):
			t.Errorf("agentjail did not end a minute after SIGKILL:\n%s", stuck(b.cmd.Process.Pid))
		}
	})
	return b
}

// wait waits (at most a minute) for the run to end and returns its code.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		t.Fatalf("agentjail did not finish in a minute; stderr:\n%s\nits processes:\n%s", b.stderr.String(), stuck(b.cmd.Process.Pid))
	}
	if strings.Contains(b.stderr.String(), "panic") {
		t.Errorf("agentjail panicked:\n%s", b.stderr.String())
	}
	return b.code
}

// running reports whether the run has not ended yet, failing the test
// when it has.
func (b *background) running(t *testing.T) bool {
	t.Helper()
	select {
	case <-b.exited:
		t.Fatalf("agentjail ended early (exit %d):\n%s", b.code, b.stderr.String())
	default:
	}
	return true
}

// token is a unique string to find a test's processes by their command
// line: `sleep 1000.<digits>` is a valid sleep and names only them.
func token() string {
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("1000.%d", uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
}

// procsWith lists the live (not zombie) processes whose command line
// contains s, other than except.
func procsWith(s string, except ...int) []string {
	return liveProcs(func(d string, pid int) bool {
		if pid == os.Getpid() || slices.Contains(except, pid) {
			return false
		}
		cmd, err := os.ReadFile(d + "/cmdline")
		return err == nil && bytes.Contains(cmd, []byte(s))
	})
}

// procsWithEnv lists the live (not zombie) processes whose environment
// holds the variable kv ("NAME=value", exactly): a run's processes carry
// AGENTJAIL_RUN=<run id>.
func procsWithEnv(kv string) []string {
	return liveProcs(func(d string, _ int) bool {
		env, err := os.ReadFile(d + "/environ")
		return err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == kv })
	})
}

// liveProcs lists, as "PID CMDLINE", the processes that are not zombies
// and that match takes (d is the process's /proc directory).
func liveProcs(match func(d string, pid int) bool) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		var pid int
		fmt.Sscan(filepath.Base(d), &pid)
		if !match(d, pid) {
			continue
		}
		if st, err := procs.ReadStat("/proc", pid); err == nil && st.State == 'Z' {
			continue
		}
		cmd, _ := os.ReadFile(d + "/cmdline")
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return out
}

// waitFile waits until path exists, while the run is still going.
func waitFile(t *testing.T, b *background, path string) {
	t.Helper()
	waitFor(t, func() bool {
		b.running(t)
		return fileExists(path)
	})
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wantDegradationsPrinted checks that of the degradations a record lists
// exactly those named in operators (the ones weakening a value the test's
// own profile sets) were printed on stderr, once each, as `agentjail:
// degraded: WHAT: DETAIL (FIELD, ORIGIN)`; the rest, weakening a built-in
// profile's defaults, are in the record alone.
func wantDegradationsPrinted(t *testing.T, stderr string, rec runRecord, operators ...string) {
	t.Helper()
	var printed []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "agentjail: degraded: ") {
			printed = append(printed, l)
		}
	}
	var want []string
	for _, d := range rec.Degradations {
		if slices.Contains(operators, d.What) {
			want = append(want, "agentjail: degraded: "+d.What+": "+d.Detail+" (")
		}
	}
	ok := len(printed) == len(want)
	for i := range want {
		ok = ok && strings.HasPrefix(printed[i], want[i])
	}
	if !ok {
		t.Errorf("degradations printed:\n%s\nwant those of %v recorded:\n%+v", strings.Join(printed, "\n"), operators, rec.Degradations)
	}
}

// orphan is a process of the run killed after the jail ended.
type orphan struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Cmd  string `json:"cmd"`
}

// stuck describes pid and every process below it, a line each: pid,
// state, the kernel function it waits in, its name, and its kernel stack
// (root reads /proc/PID/stack). It is what a test that waited in vain
// prints, so that a hang seen only in CI says where it is. cmdline and
// environ are not read: that waits for a lock a wedged process may hold
// (stack may wait on a process in exec, but that wait can be killed).
func stuck(pid int) string {
	var out strings.Builder
	var walk func(pid, depth int)
	walk = func(pid, depth int) {
		d := fmt.Sprintf("/proc/%d", pid)
		st, err := procs.ReadStat("/proc", pid)
		if err != nil {
			fmt.Fprintf(&out, "%*s%d: gone\n", 2*depth, "", pid)
			return
		}
		// Each thread's wait (a Go program's are mostly futex waits), and
		// the stack of the main thread and of any in uninterruptible sleep.
		tasks, _ := filepath.Glob(d + "/task/*")
		var waits []string
		for _, task := range tasks {
			wchan, _ := os.ReadFile(task + "/wchan")
			waits = append(waits, string(wchan))
		}
		fmt.Fprintf(&out, "%*s%d %c %s threads waiting in: %s\n", 2*depth, "", pid, st.State, st.Comm, strings.Join(waits, " "))
		for _, task := range tasks {
			tstat, _ := os.ReadFile(task + "/stat")
			if ts, err := procs.ParseStat(tstat); filepath.Base(task) != strconv.Itoa(pid) && (err != nil || ts.State != 'D') {
				continue
			}
			if stack, err := os.ReadFile(task + "/stack"); err == nil && len(stack) > 0 {
				fmt.Fprintf(&out, "%*s  thread %s:\n", 2*depth, "", filepath.Base(task))
				for _, l := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
					fmt.Fprintf(&out, "%*s  | %s\n", 2*depth, "", l)
				}
			}
		}
		for _, task := range tasks {
			kids, _ := os.ReadFile(task + "/children")
			for _, k := range strings.Fields(string(kids)) {
				var kid int
				fmt.Sscan(k, &kid)
				walk(kid, depth+1)
			}
		}
	}
	walk(pid, 0)
	return out.String()
}

package live

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
)

func TestLiveRunAnswersStatusAndStop(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "runs")
	l := New(dir, runstate.State{RunID: "abcdefgh", Profile: "tier1", StartedAt: record.Time(time.Now()), StopWaitMS: 1000})
	if _, err := runstate.Find(dir, "/proc", "abcdefgh"); !errors.Is(err, runstate.ErrUnknownRun) {
		t.Errorf("a run is listed before its state file is written: %v", err)
	}
	if err := l.Open("", nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run directory: %v %v", fi.Mode(), err)
	}
	l.SetStatus(func() Status { return Status{RunID: "abcdefgh", IdleMS: 42, Bytes: record.Bytes{Stdout: 7}} })
	st, err := runstate.Find(dir, "/proc", "abcd")
	if err != nil || !st.Alive || st.PID != os.Getpid() {
		t.Fatalf("Find by prefix: %+v %v", st, err)
	}
	s, err := Query(st)
	if err != nil || s.IdleMS != 42 || s.Bytes.Stdout != 7 {
		t.Fatalf("Query: %+v %v", s, err)
	}
	// The supervisor acts on the stop, then ends; Stop returns the outcome.
	go func() {
		<-l.Stops()
		l.Close(&record.Record{Reason: record.ReasonStopped, ExitCode: record.ExitTimeout})
	}()
	reason, code, err := Stop(st)
	if err != nil || reason != record.ReasonStopped || code != record.ExitTimeout {
		t.Fatalf("Stop: %s %d %v", reason, code, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("state left after Close: %v", left)
	}
	if _, err := runstate.Find(dir, "/proc", "abcd"); !errors.Is(err, runstate.ErrUnknownRun) {
		t.Errorf("Find after the end: %v", err)
	}
}

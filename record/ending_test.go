package record

import "testing"

func TestEnding(t *testing.T) {
	t.Parallel()
	pids, mem, sig := int64(4096), int64(3<<29), "SIGTERM"
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Reason: ReasonPidsLimit, ExitCode: 122, Limits: Limits{PidsMax: &pids}}, "the run ended: limits.pids reached (4096 tasks), a fork was refused (exit 122); raise limits.pids if the task needs more"},
		{Record{Reason: ReasonMemoryLimit, ExitCode: 122, Limits: Limits{MemoryMax: &mem}}, "the run ended: limits.memory reached (1.5 GiB, tmpfs files included), the kernel killed a process (exit 122); raise limits.memory if the task needs more"},
		{Record{Reason: ReasonWallTimeout, ExitCode: 124, Limits: Limits{WallMS: 2000}}, "the run ended: wall limit 2s reached (exit 124)"},
		{Record{Reason: ReasonIdleTimeout, ExitCode: 124, Limits: Limits{IdleMS: 120000}}, "the run ended: idle limit 2m0s reached: no output for that long (exit 124)"},
		{Record{Reason: ReasonStopped, ExitCode: 124}, "the run ended: stopped by agentjail stop (exit 124)"},
		{Record{Reason: ReasonStopped, ExitCode: 124, Terminal: &Terminal{EndedByEscape: true}}, "the run ended: ended by the operator's ~. (exit 124)"},
		{Record{Reason: ReasonInterrupted, ExitCode: 143, Signal: &sig}, "the run ended: agentjail received SIGTERM (exit 143)"},
		{Record{Reason: ReasonViolation, ExitCode: 123, Violations: []Note{{What: ViolationProtected}, {What: ViolationSetID}, {What: ViolationProtected}}},
			"the run ended: the checks after it found the policy violated (2 protected, 1 setid, listed above) (exit 123)"},
		{Record{Reason: ReasonExit}, ""},
		{Record{Reason: ReasonSetupFailed, ExitCode: 125, Error: "x"}, ""},
		{Record{Reason: ReasonSignal, Signal: &sig}, ""},
	} {
		if got := c.r.Ending(); got != c.want {
			t.Errorf("%s: %q, want %q", c.r.Reason, got, c.want)
		}
	}
}

package record

import (
	"strings"
	"testing"
)

func TestLimitMessage(t *testing.T) {
	t.Parallel()
	pids, mem := int64(4096), int64(3<<29)
	r := Record{Reason: ReasonPidsLimit}
	r.Limits.PidsMax = &pids
	if got := r.LimitMessage(); !strings.HasPrefix(got, "the jail reached limits.pids (4096 tasks") || !strings.Contains(got, "exit 122") {
		t.Errorf("pids: %q", got)
	}
	r = Record{Reason: ReasonMemoryLimit}
	r.Limits.MemoryMax = &mem
	if got := r.LimitMessage(); !strings.Contains(got, "limits.memory (1.5 GiB, its tmpfs files included)") {
		t.Errorf("memory: %q", got)
	}
	if got := (&Record{Reason: ReasonExit}).LimitMessage(); got != "" {
		t.Errorf("exit: %q", got)
	}
}

package launch

import (
	"strings"
	"testing"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
)

// TestDegradedSaysWhatWeakensTheOperators: of the degradations a run
// records, only those weakening a value the operator set (a flag, a
// profile file of theirs) are printed, naming the field and where it was
// set; a built-in profile's default, and what nobody asked for by name,
// are recorded only.
func TestDegradedSaysWhatWeakensTheOperators(t *testing.T) {
	t.Parallel()
	j := &Jail{Policy: policy.Policy{Origins: policy.Origins{
		"limits.rlimits[nofile]": "profiles/_base.yaml:125:5",  // a built-in's
		"limits.rlimits[nproc]":  "/etc/agentjail/ci.yaml:7:5", // the operator's
		"limits.pids":            "profiles/_base.yaml:131:3",
		"limits.memory":          "/etc/agentjail/ci.yaml:9:3",
		"filesystem.proc":        "/etc/agentjail/ci.yaml:3:3",
		"filesystem.home.size":   "profiles/_base.yaml:81:5",
	}}}
	notes := []record.Note{
		{What: "rlimit.nofile", Detail: "65536 asked, 20000 applied"},
		{What: "rlimit.nproc", Detail: "100000 asked, 4096 applied"},
		{What: "cgroup", Detail: "no cgroup v2 hierarchy is mounted"},
		{What: "cgroup.pids", Detail: "no pids controller"},
		{What: "cgroup.memory", Detail: "no memory controller"},
		{What: "staging.size", Detail: "not capped"},
		{What: "live", Detail: "cannot publish the run"},
		{What: "jail", Detail: "no fresh /proc"},
	}
	var out strings.Builder
	if got := j.degraded(&out, notes...); len(got) != len(notes) {
		t.Errorf("returned %d of %d degradations: the record must keep them all", len(got), len(notes))
	}
	want := "agentjail: degraded: rlimit.nproc: 100000 asked, 4096 applied (limits.rlimits[nproc], /etc/agentjail/ci.yaml:7:5)\n" +
		"agentjail: degraded: cgroup.memory: no memory controller (limits.memory, /etc/agentjail/ci.yaml:9:3)\n" +
		"agentjail: degraded: jail: no fresh /proc (filesystem.proc, /etc/agentjail/ci.yaml:3:3)\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

package launch

import (
	"maps"
	"math"
	"testing"

	"github.com/agentjail/agentjail/policy"
)

// TestCallerRlimits: a caller's limits reach the jail as bwrap would have
// inherited them: a profile's limit held to the caller's hard one, an
// unset one the caller's soft one where it is lower than this process's,
// and none at all for a run of this process's own.
func TestCallerRlimits(t *testing.T) {
	own := func(name string) (uint64, bool) {
		return map[string]uint64{"cpu": 1 << 62, "as": 1 << 62, "core": 0}[name], name != "stack"
	}
	set := policy.Rlimits{"nofile": 65536, "nproc": 4096}
	got := callerRlimits(set, map[string]CallerRlimit{
		"nofile": {Soft: 1024, Hard: 4096},        // held to the hard limit
		"nproc":  {Soft: 100, Hard: 1 << 40},      // above the profile's: the profile's
		"cpu":    {Soft: 3, Hard: math.MaxUint64}, // lowered by the caller
		"as":     {Soft: 1 << 62, Hard: 1 << 62},  // as this process's: nothing
		"core":   {Soft: 5, Hard: 5},              // above this process's: nothing
		"stack":  {Soft: 1, Hard: 1},              // this process's unknown: nothing
	}, own)
	want := policy.Rlimits{"nofile": 4096, "nproc": 4096, "cpu": 3}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if set["nofile"] != 65536 {
		t.Error("the profile's map was changed")
	}
	if got := callerRlimits(set, nil, own); !maps.Equal(got, set) {
		t.Errorf("no caller: %v", got)
	}
}

package launch

import (
	"maps"
	"math"
	"testing"

	"github.com/agentjail/agentjail/policy"
)

// TestCallerRlimits: a caller's limits reach the jail as bwrap would have
// inherited them, or stricter: a profile's limit held to the caller's hard
// one; an unset one the caller's soft one where its soft or hard one is
// lower than this process's (an unset nproc left to the pids fallback);
// none at all for a run of this process's own.
func TestCallerRlimits(t *testing.T) {
	own := func(name string) (CallerRlimit, bool) {
		l := map[string]CallerRlimit{"rss": {1 << 62, 1 << 62}, "cpu": {1 << 62, 1 << 62}, "as": {1 << 62, 1 << 62}, "core": {0, 1 << 62}, "fsize": {1 << 40, 1 << 62}, "nproc": {1 << 20, 1 << 20}}[name]
		return l, name != "stack"
	}
	set := policy.Rlimits{"nofile": 65536, "nproc": 4096}
	got := callerRlimits(set, map[string]CallerRlimit{
		"nofile": {Soft: 1024, Hard: 4096},        // held to the hard limit
		"nproc":  {Soft: 100, Hard: 1 << 40},      // above the profile's: the profile's
		"cpu":    {Soft: 3, Hard: math.MaxUint64}, // lowered by the caller
		"as":     {Soft: 1 << 62, Hard: 1 << 62},  // as this process's: nothing
		"rss":    {Soft: 1 << 63, Hard: 1 << 63},  // above this process's: nothing
		"core":   {Soft: 5, Hard: 5},              // hard below this process's: the caller's
		"stack":  {Soft: 1, Hard: 1},              // this process's unknown: nothing
		"fsize":  {Soft: 1 << 40, Hard: 1 << 41},  // only the hard limit lower: soft and hard
	}, own)
	want := policy.Rlimits{"nofile": 4096, "nproc": 4096, "cpu": 3, "fsize": 1 << 40, "core": 5}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if set["nofile"] != 65536 {
		t.Error("the profile's map was changed")
	}
	// nproc unset stays unset: the profile's pids fallback is the jail's.
	if got := callerRlimits(policy.Rlimits{}, map[string]CallerRlimit{"nproc": {Soft: 10, Hard: 10}}, own); len(got) != 0 {
		t.Errorf("an unset nproc: %v", got)
	}
	if got := callerRlimits(set, nil, own); !maps.Equal(got, set) {
		t.Errorf("no caller: %v", got)
	}
}

package mounts

import "testing"

func TestPathSet(t *testing.T) {
	t.Parallel()
	s := NewPathSet("/a/b", "/x")
	for p, want := range map[string][3]bool{ // Has, Covers, HasBelow
		"/a/b":   {true, true, false},
		"/a/b/c": {false, true, false},
		"/a/bc":  {false, false, false},
		"/a":     {false, false, true},
		"/":      {false, false, true},
		"/x/y/z": {false, true, false},
		"/y":     {false, false, false},
	} {
		if got := [3]bool{s.Has(p), s.Covers(p), s.HasBelow(p)}; got != want {
			t.Errorf("%s: Has, Covers, HasBelow = %v, want %v", p, got, want)
		}
	}
	if !NewPathSet("/").Covers("/any/thing") {
		t.Error("/ covers every path")
	}
}

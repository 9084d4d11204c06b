package procs

import "testing"

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line string
		want Stat
		bad  bool
	}{
		{line: "42 (sleep) S 7 42 7 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10 0 0 0",
			want: Stat{Comm: "sleep", State: 'S', PPID: 7, PGID: 42, Start: 123456}},
		// comm is user-chosen: spaces and ") Z 1 " must not shift fields.
		{line: "9 (a) Z 1 (b) R 3 9 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0",
			want: Stat{Comm: "a) Z 1 (b", State: 'R', PPID: 3, PGID: 9, Start: 77}},
		{line: "5 (zombie) Z 1 5 5 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 18446744073709551615",
			want: Stat{Comm: "zombie", State: 'Z', PPID: 1, PGID: 5, Start: 99}},
		{line: "", bad: true},
		{line: "1 (x) S", bad: true},
		{line: "1 (x) S notanumber 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", bad: true},
	} {
		got, err := ParseStat([]byte(c.line))
		if c.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", c.line, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
}

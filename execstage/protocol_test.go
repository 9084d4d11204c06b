package execstage

import (
	"slices"
	"testing"

	"github.com/agentjail/agentjail/record"
)

// TestWordsParse: what the renderer writes for the stage is what the stage
// reads, flags and the agent's own "--" included.
func TestWordsParse(t *testing.T) {
	t.Parallel()
	for _, a := range []Args{
		{Report: FDReport, Control: -1, Rlimits: []string{"nofile=1024", "core=0"}, Argv: []string{"sh", "-c", "echo --"}},
		{Report: -1, Control: -1, Argv: []string{"--", "x"}},
		{Report: FDReport, Control: FDControl, Listen: []string{"127.0.0.1:3128", "[::1]:3128"}, Argv: []string{"true"}},
		{Report: FDReport, Control: FDControl, Pty: true, Argv: []string{"claude"}},
	} {
		w := a.Words()
		if w[0] != Path || !IsStage(w[0]) {
			t.Fatalf("Words()[0] = %q", w[0])
		}
		got, err := Parse(w[1:])
		if err != nil || got.Report != a.Report || got.Control != a.Control || got.Pty != a.Pty || !slices.Equal(got.Listen, a.Listen) ||
			!slices.Equal(got.Rlimits, a.Rlimits) || !slices.Equal(got.Argv, a.Argv) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", w[1:], got, err, a)
		}
	}
	for _, bad := range [][]string{{FlagReport}, {FlagReport, "x", "--", "true"}, {"--other", "1", "--", "true"},
		{FlagControl, "-1", "--", "true"}, {FlagListen, "127.0.0.1:1", "--", "true"}, {FlagPty, "--", "true"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestReadReport reads the lines Main writes.
func TestReadReport(t *testing.T) {
	t.Parallel()
	res := ReadReport([]byte(`{"rlimit":"nofile","asked":"999","applied":"512"}
{"path":"/bin/x","errno":13}
`))
	if len(res.Rlimits) != 1 || res.Rlimits[0].Applied != "512" || res.ExecFailure == nil || res.ExecFailure.ExitCode() != 126 || res.Err != nil {
		t.Errorf("ReadReport: %+v", res)
	}
	if res := ReadReport([]byte(`{"error":"exec stage: no command"}` + "\n")); res.Err == nil || res.ExecFailure != nil {
		t.Errorf("ReadReport of a failure: %+v", res)
	}
	if (&record.ExecFailure{Errno: 2}).ExitCode() != 127 {
		t.Error("ENOENT is not 127")
	}
}

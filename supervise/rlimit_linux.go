package supervise

import (
	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/execstage"
)

// raiseHard raises agentjail's own hard limits (never the soft ones, so
// agentjail itself is not affected) to the values asked above them, so that
// the run user's exec stage may set them: a process can lower a limit but
// not raise a hard one. Without CAP_SYS_RESOURCE this fails and the exec
// stage applies the hard limit in force (and says so).
func raiseHard(limits map[string]uint64) {
	for name, want := range limits {
		res, ok := execstage.Resources[name]
		var l unix.Rlimit
		if !ok || unix.Getrlimit(res, &l) != nil || l.Max >= want {
			continue
		}
		unix.Setrlimit(res, &unix.Rlimit{Cur: l.Cur, Max: want})
	}
}

package supervise

import (
	"math"
	"strconv"

	"golang.org/x/sys/unix"
)

// Rlimits are applied by the exec stage to itself just before it execs the
// agent (ExecStage), so every process of the agent's inherits them and none
// can raise them. Neither simpler place works: Go's SysProcAttr has no
// rlimit field; setrlimit on agentjail around the fork would bound the
// supervisor as well (fsize would SIGXFSZ its --log writes, as would starve
// the Go heap), and a hard limit it lowers it could not raise again;
// prlimit(2) on bwrap, which runs as the run user, needs CAP_SYS_RESOURCE,
// which root lacks in many containers (measured on this project's CI host:
// EPERM); a trampoline exec in front of bwrap costs a process start per
// launch. bwrap's own two processes run no agent code and keep agentjail's
// limits.
var rlimitResources = map[string]int{
	"as": unix.RLIMIT_AS, "core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU,
	"data": unix.RLIMIT_DATA, "fsize": unix.RLIMIT_FSIZE, "locks": unix.RLIMIT_LOCKS,
	"memlock": unix.RLIMIT_MEMLOCK, "msgqueue": unix.RLIMIT_MSGQUEUE, "nice": unix.RLIMIT_NICE,
	"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC, "rss": unix.RLIMIT_RSS,
	"rtprio": unix.RLIMIT_RTPRIO, "rttime": unix.RLIMIT_RTTIME, "sigpending": unix.RLIMIT_SIGPENDING,
	"stack": unix.RLIMIT_STACK,
}

// raiseHard raises agentjail's own hard limits (never the soft ones, so
// agentjail itself is not affected) to the values asked above them, so that
// the run user's exec stage may set them: a process can lower a limit but
// not raise a hard one. Without CAP_SYS_RESOURCE this fails and the exec
// stage applies the hard limit in force (and says so).
func raiseHard(limits map[string]uint64) {
	for name, want := range limits {
		res, ok := rlimitResources[name]
		var l unix.Rlimit
		if !ok || unix.Getrlimit(res, &l) != nil || l.Max >= want {
			continue
		}
		unix.Setrlimit(res, &unix.Rlimit{Cur: l.Cur, Max: want})
	}
}

func rlimitString(v uint64) string {
	if v == math.MaxUint64 {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

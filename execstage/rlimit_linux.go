package execstage

import (
	"math"
	"strconv"

	"golang.org/x/sys/unix"
)

// Resources name the rlimits the stage applies (profiles' limits.rlimits).
// Rlimits are applied by the exec stage to itself just before it execs the
// agent (Main), so every process of the agent's inherits them and none
// can raise them. Neither simpler place works: Go's SysProcAttr has no
// rlimit field; setrlimit on agentjail around the fork would bound the
// supervisor as well (fsize would SIGXFSZ its --log writes, as would starve
// the Go heap), and a hard limit it lowers it could not raise again;
// prlimit(2) on bwrap, which runs as the run user, needs CAP_SYS_RESOURCE,
// which root lacks in many containers (measured on this project's CI host:
// EPERM); a trampoline exec in front of bwrap costs a process start per
// launch. bwrap's own two processes run no agent code and keep agentjail's
// limits.
var Resources = map[string]int{
	"as": unix.RLIMIT_AS, "core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU,
	"data": unix.RLIMIT_DATA, "fsize": unix.RLIMIT_FSIZE, "locks": unix.RLIMIT_LOCKS,
	"memlock": unix.RLIMIT_MEMLOCK, "msgqueue": unix.RLIMIT_MSGQUEUE, "nice": unix.RLIMIT_NICE,
	"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC, "rss": unix.RLIMIT_RSS,
	"rtprio": unix.RLIMIT_RTPRIO, "rttime": unix.RLIMIT_RTTIME, "sigpending": unix.RLIMIT_SIGPENDING,
	"stack": unix.RLIMIT_STACK,
}

func rlimitString(v uint64) string {
	if v == math.MaxUint64 {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

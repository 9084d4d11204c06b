package policy

import (
	"strconv"
)

// Invocation is what the run-user rule needs to know about how agentjail
// was started. The caller gathers it; PickRunUser is pure.
type Invocation struct {
	UID      int    // agentjail's real uid
	FlagUser string // --user, "" when not given
	SudoUID  string // $SUDO_UID
	SudoGID  string // $SUDO_GID
	DirOwner int    // owner uid of the start directory, -1 if unknown
	Dir      string // the start directory
}

// WhyInvoker is UserChoice.Why when agentjail runs without root: the agent
// runs as the operator.
const WhyInvoker = "the invoking user"

// UserChoice is the outcome of the run-user rule, before the user database
// is asked: Spec is a name or a uid, GID an optional group id.
type UserChoice struct {
	Spec string
	GID  string
	// Why says which branch chose it ("--user", "$SUDO_UID", ...), for
	// messages and the run record.
	Why string
}

// PickRunUser applies the run-user rule: --user, else the policy's user,
// else $SUDO_UID/$SUDO_GID, else the owner of the start directory when that
// is not root, else nobody. A non-root caller always runs as itself; a
// different --user or policy user is then an error for the caller to report
// (Spec and Why say what was asked).
func PickRunUser(p Policy, in Invocation) UserChoice {
	switch {
	case in.FlagUser != "":
		return UserChoice{Spec: in.FlagUser, Why: "--user"}
	case p.User != "":
		return UserChoice{Spec: p.User, Why: "user: at " + p.Origins.Of("user")}
	case in.UID != 0:
		return UserChoice{Spec: strconv.Itoa(in.UID), Why: WhyInvoker}
	case in.SudoUID != "" && in.SudoUID != "0":
		return UserChoice{Spec: in.SudoUID, GID: in.SudoGID, Why: "$SUDO_UID"}
	case in.DirOwner > 0:
		return UserChoice{Spec: strconv.Itoa(in.DirOwner), Why: "the owner of " + in.Dir}
	}
	why := "the fallback: no --user, user: or $SUDO_UID, and the start directory's owner is unknown"
	if in.DirOwner == 0 {
		why = "the fallback: no --user, user: or $SUDO_UID, and the start directory " + in.Dir + " is root's"
	}
	return UserChoice{Spec: "nobody", Why: why}
}

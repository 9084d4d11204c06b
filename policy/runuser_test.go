package policy

import "testing"

func TestPickRunUser(t *testing.T) {
	t.Parallel()
	withUser := Policy{User: "agent", Origins: Origins{"user": "p.yaml:3:1"}}
	for _, c := range []struct {
		name string
		p    Policy
		in   Invocation
		want UserChoice
	}{
		{"flag wins", withUser, Invocation{FlagUser: "bob", SudoUID: "1000", DirOwner: 1001}, UserChoice{Spec: "bob", Why: "--user"}},
		{"policy user", withUser, Invocation{SudoUID: "1000", DirOwner: 1001}, UserChoice{Spec: "agent", Why: "user: at p.yaml:3:1"}},
		{"non-root runs as itself", Policy{}, Invocation{UID: 1002, SudoUID: "1000", DirOwner: 1001}, UserChoice{Spec: "1002", Why: "the invoking user"}},
		{"sudo", Policy{}, Invocation{SudoUID: "1000", SudoGID: "1005", DirOwner: 1001}, UserChoice{Spec: "1000", GID: "1005", Why: "$SUDO_UID"}},
		{"sudo as root is ignored", Policy{}, Invocation{SudoUID: "0", DirOwner: 1001, Dir: "/w"}, UserChoice{Spec: "1001", Why: "the owner of /w"}},
		{"directory owner", Policy{}, Invocation{DirOwner: 1001, Dir: "/w"}, UserChoice{Spec: "1001", Why: "the owner of /w"}},
		{"root-owned directory", Policy{}, Invocation{DirOwner: 0, Dir: "/"}, UserChoice{Spec: "nobody", Why: "the fallback: no --user, user: or $SUDO_UID, and the start directory / is root's"}},
		{"unknown owner", Policy{}, Invocation{DirOwner: -1}, UserChoice{Spec: "nobody", Why: "the fallback: no --user, user: or $SUDO_UID, and the start directory's owner is unknown"}},
	} {
		if got := PickRunUser(c.p, c.in); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

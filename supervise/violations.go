package supervise

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/mounts"
)

// What a violation note names.
const (
	ViolationProtected = "protected" // a protected path appeared, changed or went away
	ViolationSetID     = "setid"     // set-user/group-id bits the run set (stripped)
	ViolationDevice    = "device"    // a device node the run made (removed)
)

// ProtectedChanges compares the protected paths before and after a run.
// Anything that appeared, changed or went away is a violation: the
// read-only binds cover what existed at launch, so a difference means the
// agent got around them (a protected name created below the top of a
// writable root, or after a parent directory was moved aside) or someone
// outside the jail changed it meanwhile; agentjail cannot tell which, and
// restores nothing. A path inside a listed one is not listed again.
func ProtectedChanges(before, after mounts.Snapshot) []Note {
	var all []change
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			all = append(all, change{p, "appeared"})
		case a.Ino != b.Ino || a.Mode.Type() != b.Mode.Type():
			all = append(all, change{p, "was replaced"})
		case a != b:
			all = append(all, change{p, "changed"})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			all = append(all, change{p, "went away"})
		}
	}
	slices.SortFunc(all, func(x, y change) int { return strings.Compare(x.path, y.path) })
	var notes []Note
	var listed []string
	for _, c := range all {
		if slices.ContainsFunc(listed, func(l string) bool { return strings.HasPrefix(c.path, l+"/") }) {
			continue
		}
		// A directory that only changed because what is inside it did is
		// told by its entries.
		if c.how == "changed" && after[c.path].Mode.IsDir() && hasChangeBelow(all, c.path) {
			continue
		}
		listed = append(listed, c.path)
		notes = append(notes, Note{What: ViolationProtected, Detail: fmt.Sprintf(
			"%s %s during the run (a protected path under a writable root); nothing was restored: check it before git, a shell or an agent uses it",
			c.path, c.how)})
	}
	return notes
}

type change struct{ path, how string }

func hasChangeBelow(all []change, dir string) bool {
	return slices.ContainsFunc(all, func(c change) bool { return strings.HasPrefix(c.path, dir+"/") })
}

func setIDNote(p string, mode uint32) Note {
	return Note{What: ViolationSetID, Detail: fmt.Sprintf("%s: the run made it set-user/group-id (mode %04o); the bits were stripped (now %04o)", p, mode&0o7777, mode&0o1777)}
}

func deviceNote(p string, major, minor uint32) Note {
	return Note{What: ViolationDevice, Detail: fmt.Sprintf("%s: the run made a device node (%d:%d) under a writable root; it was removed", p, major, minor)}
}

// Violate adds violations to the record: any one ends the run with reason
// violation and exit 125, unless the setup had failed (which wins).
func (r *Record) Violate(notes ...Note) {
	if len(notes) == 0 {
		return
	}
	r.Violations = append(r.Violations, notes...)
	if r.Reason != ReasonSetupFailed {
		r.Reason, r.ExitCode = ReasonViolation, ExitSetup
	}
}

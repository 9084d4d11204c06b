package mounts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
)

// ProtectedChanges compares the protected paths before and after a run
// (TakeSnapshot).
// Anything that appeared, changed or went away is a violation: the
// read-only binds cover what existed at launch, so a difference means the
// agent got around them (a protected name created below the top of a
// writable root, or after a parent directory was moved aside) or someone
// outside the jail changed it meanwhile; agentjail cannot tell which, and
// restores nothing. A path inside a listed one is not listed again.
func ProtectedChanges(before, after Snapshot) []record.Note {
	var all []change
	var cuts []string // paths a snapshot stopped at (Entry.Cut), or after
	// Below those, one snapshot may hold what the other did not reach:
	// what appeared or went away there is not known.
	short := NewPathSet()
	for _, s := range []Snapshot{before, after} {
		for p, e := range s {
			if e.Cut || e.Skipped {
				short.Add(p)
			}
		}
	}
	unknown := func(p string) bool { return short.Covers(parent(p)) }
	for p, a := range after {
		b, ok := before[p]
		switch {
		case a.Unreadable:
			all = append(all, change{p, unreadable})
		case a.Cut || b.Cut:
			cuts = append([]string{p}, cuts...) // where it stopped, first
		case a.Skipped || b.Skipped:
			cuts = append(cuts, p)
		case !ok && unknown(p):
		case !ok:
			all = append(all, change{p, "appeared"})
		case a.Ino != b.Ino || a.Mode.Type() != b.Mode.Type():
			all = append(all, change{p, "was replaced"})
		case a != b:
			all = append(all, change{p, "changed"})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok && !unknown(p) {
			all = append(all, change{p, "went away"})
		}
	}
	// A directory sorts before what it holds (its path is their prefix).
	slices.SortFunc(all, func(x, y change) int { return strings.Compare(x.path, y.path) })
	changed := NewPathSet()
	for _, c := range all {
		changed.Add(c.path)
	}
	var notes []record.Note
	listed := NewPathSet()
	for _, c := range all {
		if listed.Covers(parent(c.path)) {
			continue
		}
		// A directory that only changed because what is inside it did is
		// told by its entries.
		if c.how == "changed" && after[c.path].Mode.IsDir() && changed.HasBelow(c.path) {
			continue
		}
		listed.Add(c.path)
		detail := fmt.Sprintf("%s %s during the run (a protected path under a writable root); nothing was restored: check it before git, a shell or an agent uses it", c.path, c.how)
		if c.how == unreadable {
			detail = fmt.Sprintf("%s could not be read after the run (its mode keeps agentjail out), so nothing below it was checked: a repository made there would go unseen; make it readable (chmod u+rx) and check it before git runs there", c.path)
		}
		notes = append(notes, record.Note{What: record.ViolationProtected, Detail: detail})
	}
	if len(cuts) > 0 {
		notes = append(notes, record.Note{What: record.ViolationUnchecked, Detail: fmt.Sprintf("the protected paths hold more than agentjail compares (%s of paths): %d not (all) checked, from %s on; remove what should not be there", policy.FormatSize(int64(maxSnapshot)), len(cuts), cuts[0])})
	}
	return notes
}

type change struct{ path, how string }

// unreadable is the how of a directory the check after the run could not
// read.
const unreadable = "could not be read"

package launch

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/record"
)

// QuarantineSuffix is added to the name of what quarantine moves aside,
// before the run's id.
const QuarantineSuffix = ".agentjail-quarantine-"

// quarantine compares the protected paths before and after a run, as
// mounts.ProtectedChanges does, and first moves aside what the run made that git
// would take for a git directory of the operator's: every .git (a file or
// a directory) that is new, and every new commondir. Each is renamed in
// its own directory, reached through w (no link in a writable root
// followed) and by descriptor, to its name with QuarantineSuffix and
// runID: the operator's next git then finds none there (a new submodule
// entered in the index whose .git names the agent's git directory, whose
// core.fsmonitor would run at the next `git status`, is a directory
// without a repository again). It returns the notes: one for each path
// moved aside, saying where it is now, then mounts.ProtectedChanges' for the rest.
// protected are the paths the jail protected (mounts.Plan.Protected, masks
// included): a .git that held one of them was there before the run, even
// when the snapshot holds nothing of it (its config and hooks were
// missing, and masked).
func quarantine(before, after mounts.Snapshot, protected []string, w hostfs.Walker, runID string) []record.Note {
	var notes []record.Note
	rest := maps.Clone(after)
	for _, p := range newGitEntries(before, after, protected) {
		for q := range rest {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(rest, q)
			}
		}
		detail := fmt.Sprintf("%s appeared during the run: git takes it for a git directory (%s)", p, path.Base(p))
		d, name, err := w.Parent(p)
		var aside string
		if err == nil {
			aside, err = d.MoveAside(name, QuarantineSuffix+runID)
			d.Close()
		}
		if err != nil {
			detail += fmt.Sprintf(", and could not be moved aside (%v): remove it before git runs there", err)
		} else {
			detail += fmt.Sprintf("; moved aside to %s, so that git does not use it: review it before you move it back", aside)
		}
		notes = append(notes, record.Note{What: record.ViolationProtected, Detail: detail})
	}
	return append(notes, mounts.ProtectedChanges(before, rest)...)
}

// newGitEntries returns the outermost new .git entries, and the new
// commondir files outside them, that after holds: a .git is new when
// neither before nor protected held it or anything below it.
func newGitEntries(before, after mounts.Snapshot, protected []string) []string {
	var found []string
	seen := func(p string) bool {
		return slices.ContainsFunc(found, func(f string) bool { return p == f || strings.HasPrefix(p, f+"/") })
	}
	isNew := func(p string) bool {
		if _, ok := before[p]; ok {
			return false
		}
		for q := range before {
			if strings.HasPrefix(q, p+"/") {
				return false
			}
		}
		return !slices.ContainsFunc(protected, func(q string) bool { return q == p || strings.HasPrefix(q, p+"/") })
	}
	for _, q := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[q]; ok || seen(q) {
			continue
		}
		parts := strings.Split(q, "/")
		for i := range parts {
			if parts[i] != ".git" {
				continue
			}
			if p := strings.Join(parts[:i+1], "/"); isNew(p) {
				found = append(found, p)
				break
			}
		}
		if !seen(q) && path.Base(q) == "commondir" {
			found = append(found, q)
		}
	}
	return found
}

package mounts

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestTakeSnapshotCoversWhatRenderProtects(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/.bashrc"] = link("../dotfiles/bashrc")
	d["srv/proj/.git/hooks/pre-commit"] = node(0o755, 1000, 1000, "#!/bin/sh")
	d["srv/proj/.mcp.json"] = node(0o444, 1000, 1000, "") // another run's placeholder
	isMask := func(p string) bool { return p == "/srv/proj/.mcp.json" }
	s := TakeSnapshot(d, in.Policy, isMask)
	var got []string
	for p := range s {
		got = append(got, p)
	}
	slices.Sort(got)
	want := []string{
		"/srv/proj/.bashrc", // a link: recorded as the link
		"/srv/proj/.env",
		"/srv/proj/.env.local",
		"/srv/proj/.git", // by type alone
		"/srv/proj/.git/config",
		"/srv/proj/.git/hooks",
		"/srv/proj/.git/hooks/pre-commit",
		"/srv/proj/.git/worktrees/w/commondir", // the worktree sub/w's, found through it
		"/srv/proj/a/b/c/.env",                 // depth 3; a/b/c/d/.env is deeper than protect_depth
		"/srv/proj/sub/.env",
		"/srv/proj/sub/w/.git",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("snapshot holds\n%q\nwant\n%q", got, want)
	}

	// What the agent makes at depth shows in the next snapshot.
	d["srv/proj/sub/.git/hooks/post-checkout"] = node(0o755, 1000, 1000, "evil")
	d["srv/proj/.git/commondir"] = node(0o644, 1000, 1000, "../evil\n")
	after := TakeSnapshot(d, in.Policy, isMask)
	for _, p := range []string{"/srv/proj/sub/.git/hooks", "/srv/proj/sub/.git/hooks/post-checkout", "/srv/proj/.git/commondir"} {
		if _, ok := after[p]; !ok {
			t.Errorf("the later snapshot lacks %s", p)
		}
	}
	d["srv/proj/.env"] = node(0o644, 1000, 1000, "SECRET=changed")
	if TakeSnapshot(d, in.Policy, isMask)["/srv/proj/.env"] == s["/srv/proj/.env"] {
		t.Error("a changed .env has the same entry")
	}
}

// TestProtectedDirAndWhatItHolds: a protected directory stays read-only
// when a protected path inside it is found first (a credential the run
// copies, ~/.codex/auth.json, inside a protected ~/.codex; a profile that
// lists secrets/key.pem before secrets): it was only pinned, writable. And
// what is missing inside it gets no mask: nothing can be made there, and
// the placeholder a mask needs, made and removed in the operator's
// directory, made the snapshots see it change.
func TestProtectedDirAndWhatItHolds(t *testing.T) {
	t.Parallel()
	d := fstest.MapFS{
		".":                 dir(0o755, 0),
		"r":                 dir(0o755, 1000),
		"r/.codex":          dir(0o755, 1000),
		"r/.codex/tmp":      dir(0o755, 1000),
		"r/secrets":         dir(0o700, 1000),
		"r/secrets/key.pem": node(0o600, 1000, 1000, "k"),
	}
	pr := findProtected(d, []string{"/r"}, []string{"/r/.codex/auth.json", "secrets/key.pem", "secrets", ".codex"}, 3, nil)
	got := formatProtection(pr)
	for _, want := range []string{"read-only /r/.codex\n", "read-only /r/secrets\n", "read-only /r/secrets/key.pem\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", strings.TrimSpace(want), got)
		}
	}
	if strings.Contains(got, "mask /r/.codex/auth.json") {
		t.Errorf("a mask inside a read-only directory:\n%s", got)
	}
}

// TestSnapshotStopsAtItsSize: an agent that planted 150 000 files with
// 4 KB paths in a protected directory made each snapshot hold a gigabyte.
// A snapshot now stops at maxSnapshot, the directory it stopped in marked,
// and the run is not clean (unchecked). Not parallel: it lowers the size.
func TestSnapshotStopsAtItsSize(t *testing.T) {
	defer func(m int) { maxSnapshot = m }(maxSnapshot)
	maxSnapshot = 4 << 10
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	for i := range 200 {
		d[fmt.Sprintf("srv/proj/.vscode/planted-%03d", i)] = node(0o644, 1000, 1000, "")
	}
	before := TakeSnapshot(d, in.Policy, nil)
	if e := before["/srv/proj/.vscode"]; !e.Cut || len(before) > 60 {
		t.Fatalf(".vscode cut %v, %d entries; want it cut, the snapshot small", e.Cut, len(before))
	}
	notes := ProtectedChanges(before, TakeSnapshot(d, in.Policy, nil))
	if len(notes) != 1 || notes[0].What != "unchecked" || !strings.Contains(notes[0].Detail, "(4KiB of paths): 5 not (all) checked, from /srv/proj/.vscode on") {
		t.Errorf("notes %v, want one unchecked for .vscode", notes)
	}
	// The agent removes half of them: the cut moves, and what one
	// snapshot reached and the other did not is no change.
	for i := range 100 {
		delete(d, fmt.Sprintf("srv/proj/.vscode/planted-%03d", i))
	}
	notes = ProtectedChanges(before, TakeSnapshot(d, in.Policy, nil))
	for _, n := range notes {
		if n.What != "unchecked" && strings.Contains(n.Detail, "/.vscode/planted-") && strings.Contains(n.Detail, "appeared") {
			t.Errorf("a file that was there before said to have appeared: %s", n.Detail)
		}
	}
	if len(notes) == 0 || notes[len(notes)-1].What != "unchecked" {
		t.Errorf("notes %v, want the cut said", notes)
	}
}

// TestSnapshotStopsAtItsDepth: a snapshot holds a descriptor a level
// while it reads a protected directory: it goes maxSnapshotDepth deep,
// and where it stopped is cut.
func TestSnapshotStopsAtItsDepth(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/.vscode/"+strings.Repeat("a/", maxSnapshotDepth+1)+"f"] = node(0o644, 1000, 1000, "")
	s := TakeSnapshot(d, in.Policy, nil)
	if e := s["/srv/proj/.vscode"]; !e.Cut {
		t.Errorf(".vscode not cut below %d levels", maxSnapshotDepth)
	}
}

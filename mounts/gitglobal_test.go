package mounts

import (
	"strings"
	"testing"
)

// TestGlobalGitConfigInAWritableHome: a home in a writable root has git's
// user configuration read-only there, the XDG file too (uncreatable when
// missing: a missing ~/.config/git, which would hold it, is a tmpfs in
// which it is masked), every file it includes (`~/.gitconfig.local`), and
// the hooks and fsmonitor command it names, for every repository under the
// roots.
func TestGlobalGitConfigInAWritableHome(t *testing.T) {
	t.Parallel()
	d := gitTree()
	f := func(p, data string) { d[p] = node(0o644, 1000, 1000, data) }
	d["srv/proj/home"] = dir(0o755, 1000)
	d["srv/proj/home/.config"] = dir(0o755, 1000)
	f("srv/proj/home/.gitconfig", "[include]\n\tpath = ~/.gitconfig.local\n[core]\n\thooksPath = ~/githooks\n")
	f("srv/proj/home/.gitconfig.local", "[include]\n\tpath = .gitconfig.deeper\n[core]\n\tfsmonitor = /srv/proj/home/bin/fsmon\n")
	p := gitPolicy(t)
	pr := findProtected(d, WritableRoots(p), p.Filesystem.Protect, *p.Filesystem.ProtectDepth, []string{"/home/op", "/srv/proj/home"})
	got := formatProtection(pr)
	for _, want := range []string{
		"read-only /srv/proj/home/.gitconfig",
		"read-only /srv/proj/home/.gitconfig.local",
		"mask /srv/proj/home/.gitconfig.deeper",
		"tmpfs /srv/proj/home/.config/git",
		"mask /srv/proj/home/.config/git/config",
		"mask /srv/proj/home/githooks",
		"tmpfs /srv/proj/home/bin",
		"mask /srv/proj/home/bin/fsmon",
		"pin /srv/proj/home",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the protection lacks %q:\n%s", want, got)
		}
	}
	// A home outside the roots is the operator's to keep.
	if strings.Contains(got, " /home/op") {
		t.Errorf("a home outside the roots is protected:\n%s", got)
	}
}

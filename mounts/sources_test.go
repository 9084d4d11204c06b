package mounts

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestCopySourcesInAWritableHome: with an operator's home given as a
// writable root (`sudo agentjail run --write ~`), the agent of one run
// could plant links for the next run's copies (~/.claude.json to
// /etc/shadow, ~/.aws to a root-only directory) or write the files
// themselves. What a plan copies from a home is protected there like any
// protected path (a link is refused, a file read-only, a missing one
// uncreatable), and a link is never copied through.
func TestCopySourcesInAWritableHome(t *testing.T) {
	t.Parallel()
	in := input(t, "tier3", "/home/op")
	d := in.Disk.(fstest.MapFS)
	d["home/op"] = dir(0o755, 1000)
	d["home/op/.claude.json"] = link("/etc/shadow")
	d["home/op/.aws"] = link("/srv/rootonly")
	_, err := Render(in)
	for _, l := range []string{"/home/op/.claude.json -> /etc/shadow", "/home/op/.aws -> /srv/rootonly"} {
		if !errors.Is(err, ErrProtectedLink) || !strings.Contains(err.Error(), l) {
			t.Errorf("the link %s is not refused: %v", l, err)
		}
	}

	accept := true
	in.Policy.Filesystem.AcceptProtectedSymlinks = &accept
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan.Copies {
		if c.Src == "/home/op/.claude.json" || strings.HasPrefix(c.Src, "/home/op/.aws") {
			t.Errorf("copies %s through the planted link", c.Src)
		}
	}
	warnings := strings.Join(plan.Warnings, "\n")
	for _, w := range []string{
		"/home/op/.claude.json is not given to the jail: /home/op/.claude.json is a symbolic link (to /etc/shadow) in a writable root",
		"/home/op/.aws is not given to the jail: /home/op/.aws is a symbolic link (to /srv/rootonly) in a writable root",
	} {
		if !strings.Contains(warnings, w) {
			t.Errorf("no warning %q:\n%s", w, warnings)
		}
	}
	for _, p := range []string{"/home/op/.claude/.credentials.json", "/home/op/.kube/config", "/home/op/.ssh/id_rsa"} {
		if !slices.Contains(plan.Protected, p) && !slices.ContainsFunc(plan.Protected, func(q string) bool { return strings.HasPrefix(p, q+"/") }) {
			t.Errorf("%s is not protected: %q", p, plan.Protected)
		}
	}
	for _, m := range []string{"/home/op/.azure", "/home/op/.docker", "/home/op/.config"} {
		if !slices.Contains(plan.Masks, m) {
			t.Errorf("the missing %s is not masked: %q", m, plan.Masks)
		}
	}
}

// TestInputsInAWritableRoot: a profile (or one it extends, or a seccomp
// file) in a writable root is read-only for the run, with one warning;
// one outside the roots is left alone.
func TestInputsInAWritableRoot(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/agentjail.yaml"] = node(0o644, 1000, 1000, "extends: tier1\n")
	d["srv/proj/conf/seccomp.json"] = node(0o644, 1000, 1000, "{}")
	in.Inputs = []string{"/srv/proj/agentjail.yaml", "/srv/proj/conf/seccomp.json", "/etc/agentjail/base.yaml"}
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/srv/proj/agentjail.yaml", "/srv/proj/conf/seccomp.json"} {
		if !slices.Contains(plan.Protected, p) {
			t.Errorf("%s is not read-only: %q", p, plan.Protected)
		}
	}
	if slices.Contains(plan.Protected, "/etc/agentjail/base.yaml") {
		t.Error("an input outside the roots is protected")
	}
	n := 0
	for _, w := range plan.Warnings {
		if strings.Contains(w, "/srv/proj/agentjail.yaml, /srv/proj/conf/seccomp.json: in a writable root, kept read-only for this run") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d warnings about the inputs, want one: %q", n, plan.Warnings)
	}
}

package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allowAll is a seccomp program that allows every system call: what an
// entry planted in the compiled-filter cache would hand the next jail.
var allowAll = []byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}

// TestEscapeSeccompCache: agentjail keeps compiled filters in its run
// directory (RUN/seccomp) and reads them back on the next launch, so an
// entry there decides the next jail's filter. The test first shows that:
// an allow-all program put in place of an entry by the cache's owner is
// loaded (the jail's ptrace works). Then the doors: an entry that is
// another user's, or a link, is not loaded; and the agent of a run, the
// same user as the operator, cannot plant one, even with the runtime
// directory's parent as its writable root: the run directory is covered in
// every jail.
func TestEscapeSeccompCache(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	xdg := visibleDir(t) // the operator's (uid 1000) runtime directory
	os.Chmod(xdg, 0o700)
	cache := filepath.Join(xdg, "agentjail", "seccomp")
	inv := invocation{cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
	ptrace := func() string { return probeResults(t, inv.run(t, "run", "--", e.probe, "ptrace"))["ptrace"] }
	if got := ptrace(); got != "EPERM" {
		t.Fatalf("ptrace in the jail: %q, want EPERM", got)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) == 0 {
		t.Fatalf("no compiled filter was cached in %s; the test proves nothing", cache)
	}
	plant := func(how func(p string, data []byte)) {
		t.Helper()
		for _, en := range entries {
			p := filepath.Join(cache, en.Name())
			data, err := os.ReadFile(p)
			header, _, ok := bytes.Cut(data, []byte("\n"))
			if err != nil || !ok {
				t.Fatalf("entry %s: %v", p, err)
			}
			os.Remove(p)
			how(p, append(append(header, '\n'), allowAll...))
		}
	}

	plant(func(p string, data []byte) { os.WriteFile(p, data, 0o600); os.Chown(p, runUID, runUID) })
	if got := ptrace(); got != "ok" {
		t.Fatalf("an allow-all entry of the cache's owner was not loaded (ptrace %q): the test cannot see a planted entry", got)
	}
	plant(func(p string, data []byte) { os.WriteFile(p, data, 0o600) }) // root's
	if got := ptrace(); got != "EPERM" {
		t.Errorf("another user's entry was loaded: ptrace %q", got)
	}
	plant(func(p string, data []byte) {
		os.WriteFile(p+".real", data, 0o600)
		os.Chown(p+".real", runUID, runUID)
		os.Symlink(p+".real", p)
	})
	if got := ptrace(); got != "EPERM" {
		t.Errorf("an entry behind a link was loaded: ptrace %q", got)
	}

	// The agent tries to plant from inside a jail whose writable root
	// holds the run directory.
	r := inv.run(t, "run", "--write", xdg, "--", "sh", "-c", `for f in `+cache+`/*; do printf x >> "$f" && echo PLANTED; done; ls `+cache+`; true`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "PLANTED") {
		t.Errorf("the agent wrote to the filter cache:\n%s%s", r.stdout, r.stderr)
	}
	if got := ptrace(); got != "EPERM" {
		t.Errorf("after the agent's attempt ptrace is %q", got)
	}
}

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunsDoNotWaitOnAnotherRunsLook: the checks after a run walk the
// writable roots in one look at the mask registry (its lock, shared), for
// as long as the agent made them to take: millions of files. Every other
// run's end, whose release of its placeholders takes the lock exclusive,
// waited on that walk, and so did a start's sweep: one agent held up
// every run of the host (seen in CI, beside a tester's run). A release
// now waits a few seconds at most, then leaves its placeholders, said,
// for the next run to remove.
func TestRunsDoNotWaitOnAnotherRunsLook(t *testing.T) {
	jailed(t)
	xdg := visibleDir(t) // the operator's (uid 1000) runtime directory: a registry of this test's own
	os.Chmod(xdg, 0o700)
	ws := workspace(t)
	inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
	wantCode(t, inv.run(t, "run", "--write", ws, "--", "true"), 0) // makes the registry
	placeholder := filepath.Join(ws, ".env")
	if fileExists(placeholder) {
		t.Fatalf("%s left after a run", placeholder)
	}

	// Another run's long look.
	lock, err := os.Open(filepath.Join(xdg, "agentjail", "masks", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	r := inv.run(t, "run", "--write", ws, "--", "true") // ends while the look lasts
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "mask placeholders left in place") || !strings.Contains(r.stderr, "the mask registry is busy") {
		t.Errorf("stderr does not say the placeholders were left:\n%s", r.stderr)
	}
	if !fileExists(placeholder) {
		t.Errorf("%s was removed while another run looked at the registry", placeholder)
	}
	lock.Close()

	// The next run's start sweeps them, and its end removes its own.
	r = inv.run(t, "run", "--write", ws, "--", "true")
	wantCode(t, r, 0)
	if fileExists(placeholder) || strings.Contains(r.stderr, "left in place") {
		t.Errorf("the next run left %s (stderr %q)", placeholder, r.stderr)
	}
}

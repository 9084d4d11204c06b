package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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

// TestChecksAfterTheRunCutShort: the checks after a run went on, for
// minutes on a tree an agent had made for it, deaf to SIGINT and SIGTERM
// (each only recorded as received), and `agentjail stop` timed out. Now an
// ending signal or a stop cuts them short: the run ends at once, a
// violation (unchecked) saying what was not checked. The checks are held
// here by the mask registry's lock, taken exclusively by the test once
// the agent has started, so that they wait for as long as the test needs.
func TestChecksAfterTheRunCutShort(t *testing.T) {
	jailed(t)
	for _, how := range []string{"SIGTERM", "agentjail stop"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			xdg := visibleDir(t)
			os.Chmod(xdg, 0o700)
			ws := workspace(t)
			inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
			rp := filepath.Join(workspace(t), "record.json")
			done := make(chan result, 1)
			go func() {
				done <- inv.run(t, "run", "--write", ws, "--record", rp, "--", "sh", "-c", `echo "$AGENTJAIL_RUN" > id; until [ -e go ]; do sleep 0.05; done`)
			}()
			idFile := filepath.Join(ws, "id")
			waitFor(t, func() bool { b, _ := os.ReadFile(idFile); return len(b) > 1 })
			id := strings.TrimSpace(string(must(os.ReadFile(idFile))))
			lockPath := filepath.Join(xdg, "agentjail", "masks", "lock")
			lock, err := os.Open(lockPath)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(ws, "go"), nil, 0o644) // the agent ends; its checks wait on the lock
			var st unix.Stat_t
			unix.Stat(lockPath, &st)
			waitFor(t, func() bool { return lockWaitedOn(st.Ino) })
			switch how {
			case "SIGTERM":
				var state struct{ PID int }
				json.Unmarshal(must(os.ReadFile(filepath.Join(xdg, "agentjail", "runs", id+".json"))), &state)
				if state.PID == 0 || unix.Kill(state.PID, unix.SIGTERM) != nil {
					t.Fatalf("no supervisor to signal (state %+v)", state)
				}
			default:
				if r := inv.run(t, "stop", id); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "violation (exit 123)") {
					t.Errorf("stop: exit %d, %q %q", r.code, r.stdout, r.stderr)
				}
			}
			r := <-done
			wantCode(t, r, 123)
			rec := readRecord(t, rp, 123)
			if len(rec.Violations) != 1 || rec.Violations[0].What != "unchecked" || !strings.Contains(rec.Violations[0].Detail, "cut short by "+how) {
				t.Errorf("violations %+v, want one unchecked, cut short by %s", rec.Violations, how)
			}
		})
	}
}

// lockWaitedOn reports whether /proc/locks lists a request blocked on
// the inode's flock.
func lockWaitedOn(ino uint64) bool {
	locks, _ := os.ReadFile("/proc/locks")
	for _, l := range strings.Split(string(locks), "\n") {
		if strings.Contains(l, "->") && strings.Contains(l, "FLOCK") && strings.Contains(l, ":"+strconv.FormatUint(ino, 10)+" ") {
			return true
		}
	}
	return false
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

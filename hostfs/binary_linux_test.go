package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// privateExe writes a stand-in for the agentjail binary under a directory
// only its owner can search, so PublicExecutable must copy it.
func privateExe(t *testing.T, content string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "agentjail")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// holdFile flocks p as a run (LOCK_SH on a copy) or a copier (LOCK_EX on
// its temporary file) would, until the test ends.
func holdFile(t *testing.T, p string, how int) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		t.Fatal(err)
	}
}

// TestPublicExecutablePrunes: a call removes the copies and temporary
// copies no one holds, keeps those a run or a copier holds, its own, and
// what is not a copy.
func TestPublicExecutablePrunes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"agentjail-1-2-3":    "old, unheld",
		"agentjail-4-5-6":    "old, held by a run",
		".agentjail-111":     "a SIGKILLed copier's",
		".agentjail-222":     "a copier's, in progress",
		"agentjail.conf":     "not a copy",
		"other-agentjail-77": "not a copy",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	holdFile(t, filepath.Join(dir, "agentjail-4-5-6"), unix.LOCK_SH)
	holdFile(t, filepath.Join(dir, ".agentjail-222"), unix.LOCK_EX)

	exe := privateExe(t, "binary one")
	got, hold, err := PublicExecutable(exe, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if filepath.Dir(got) != dir || hold == nil {
		t.Fatalf("copied to %s (hold %v), want a held copy in %s", got, hold, dir)
	}
	if data, _ := os.ReadFile(got); string(data) != "binary one" {
		t.Errorf("the copy holds %q", data)
	}
	if fi, _ := os.Stat(got); fi.Mode().Perm() != 0o755 {
		t.Errorf("the copy's mode is %v, want 0755", fi.Mode())
	}
	want := []string{".agentjail-222", "agentjail-4-5-6", filepath.Base(got), "agentjail.conf", "other-agentjail-77"}
	slices.Sort(want)
	if left := names(t, dir); !slices.Equal(left, want) {
		t.Errorf("after the copy %s holds %q, want %q", dir, left, want)
	}

	// The same binary again: the same copy, nothing new.
	again, hold2, err := PublicExecutable(exe, dir)
	if err != nil {
		t.Fatal(err)
	}
	hold2.Close()
	if left := names(t, dir); again != got || !slices.Equal(left, want) {
		t.Errorf("the same binary again gave %s and left %q, want %s and %q", again, left, got, want)
	}
}

// TestPublicExecutableKeepsHeldCopies: a run of one binary holds its copy
// while another binary's run prunes; the copy goes once its run has ended.
// A binary readable by all is not copied, and prunes too.
func TestPublicExecutableKeepsHeldCopies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one, hold1, err := PublicExecutable(privateExe(t, "binary one"), dir)
	if err != nil {
		t.Fatal(err)
	}
	two, hold2, err := PublicExecutable(privateExe(t, "binary two"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fileExists(one) || !fileExists(two) || one == two {
		t.Fatalf("the first run's copy %s was pruned while it runs, or %s is missing", one, two)
	}
	hold1.Close()
	hold2.Close()
	two2, hold2, err := PublicExecutable(privateExe(t, "binary two, rebuilt"), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hold2.Close()
	if left := names(t, dir); !slices.Equal(left, []string{filepath.Base(two2)}) {
		t.Errorf("after both runs ended, copying a rebuild left %q, want only %s", left, filepath.Base(two2))
	}

	// t.TempDir makes its directories 0700.
	pub := t.TempDir()
	os.Chmod(pub, 0o755)
	os.Chmod(filepath.Dir(pub), 0o755)
	public := filepath.Join(pub, "agentjail")
	os.WriteFile(public, []byte("installed"), 0o755)
	got, hold, err := PublicExecutable(public, dir)
	if err != nil || got != public || hold != nil {
		t.Fatalf("a binary readable by all was copied to %s (hold %v, %v)", got, hold, err)
	}
	if left := names(t, dir); len(left) != 1 {
		t.Fatalf("a run of an installed binary pruned a held copy: %q", left)
	}
	hold2.Close()
	if _, hold, err := PublicExecutable(public, dir); err != nil || hold != nil {
		t.Fatal(err)
	}
	if left := names(t, dir); len(left) != 0 {
		t.Errorf("a run of an installed binary left the unheld copies %q", left)
	}
}

// TestPublicExecutableConcurrent: runs of two binaries copy theirs and end at
// once, each pruning the other's copy when it can; while a run holds its
// copy, the copy is there with the right content (bwrap binds it by path).
func TestPublicExecutableConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exes := []string{privateExe(t, "binary zero"), privateExe(t, "binary one")}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				want := fmt.Sprintf("binary %s", []string{"zero", "one"}[(g+i)%2])
				p, hold, err := PublicExecutable(exes[(g+i)%2], dir)
				if err != nil {
					errs <- err
					return
				}
				for range 3 {
					if data, err := os.ReadFile(p); err != nil || string(data) != want {
						errs <- fmt.Errorf("a held copy %s read %q, %v; want %q", p, data, err, want)
						hold.Close()
						return // one error per goroutine: errs never fills
					}
				}
				hold.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
		return
	}
	if left := names(t, dir); len(left) > 2 {
		t.Errorf("copies left after every run ended: %q", left)
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

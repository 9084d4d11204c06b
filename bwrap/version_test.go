package bwrap

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Version{
		"bubblewrap 0.8.0\n":        {0, 8, 0},
		"bubblewrap 0.11.0":         {0, 11, 0},
		"bubblewrap 0.9.0-1ubuntu1": {0, 9, 0},
		"bubblewrap 0.10":           {0, 10, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "bwrap 0.8.0", "bubblewrap x.y"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
	if !(Version{0, 7, 9}).Less(Minimum) || Minimum.Less(Version{0, 8, 0}) || !(Version{0, 8, 0}).Less(Version{1, 0, 0}) {
		t.Error("Less is wrong")
	}
	if (Version{0, 8, 0}).Supports("--argv0") || !(Version{0, 9, 0}).Supports("--argv0") || !(Version{0, 8, 0}).Supports("--disable-userns") {
		t.Error("Supports is wrong")
	}
}

// TestDetectCaches: the version is probed once per installed binary; a
// changed binary is probed again.
func TestDetectCaches(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "bwrap")
	count := filepath.Join(dir, "count")
	script := "#!/bin/sh\necho x >> " + count + "\necho bubblewrap 0.9.0\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTJAIL_BWRAP", fake)
	cache := filepath.Join(dir, "cache")
	for range 3 {
		info, err := Detect(cache)
		if err != nil || info.Version != (Version{0, 9, 0}) || info.Path != fake {
			t.Fatalf("Detect = %+v, %v", info, err)
		}
	}
	if data, _ := os.ReadFile(count); string(data) != "x\n" {
		t.Errorf("bwrap --version ran %d times, want once", len(data)/2)
	}
	if err := os.WriteFile(fake, []byte(script+"# changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(cache); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(count); string(data) != "x\nx\n" {
		t.Errorf("a changed binary was not probed again")
	}
	// A cache others can write is not trusted (another user could pass an
	// old bwrap off as a new one): bwrap is probed again.
	if err := os.Chmod(filepath.Join(cache, "bwrap.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(cache); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(count); string(data) != "x\nx\nx\n" {
		t.Errorf("a cache file others can write was trusted")
	}
}

func TestOptionsAndCheck(t *testing.T) {
	t.Parallel()
	args := []string{"--unshare-pid", "--perms", "0755", "--size", "1024", "--tmpfs", "/tmp", "--bind", "/a", "/a", "--", "--size", "x"}
	opts, err := Options(args)
	if err != nil || strings.Join(opts, " ") != "--unshare-pid --perms --size --tmpfs --bind" {
		t.Errorf("Options = %q, %v", opts, err)
	}
	if err := Minimum.Check(args); err != nil {
		t.Errorf("Minimum.Check = %v", err)
	}
	if err := (Version{0, 6, 2}).Check(args); !errors.Is(err, ErrTooOld) || !strings.Contains(err.Error(), "bubblewrap 0.6.2 lacks --size (since 0.7.0)") {
		t.Errorf("0.6.2 Check = %v", err)
	}
	if _, err := Options([]string{"--bind", "/a", "/a", "--frobnicate"}); !errors.Is(err, ErrUnknownOption) || !strings.Contains(err.Error(), `"--frobnicate"`) {
		t.Errorf("unknown option: %v", err)
	}
	if (Version{0, 11, 0}).Supports("--frobnicate") {
		t.Error("an unlisted option is supported")
	}
}

// TestTableMatchesInstalledBwrap checks the option table against the real
// bwrap's --help: every option the table dates at or before the installed
// release is listed there with the table's number of arguments, and every
// option dated later is absent. Here bwrap is 0.8.0, the Minimum, so this
// proves the table's claims for the oldest release agentjail accepts.
func TestTableMatchesInstalledBwrap(t *testing.T) {
	t.Parallel()
	bin := testutil.RequireBwrap(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	arity := map[string]int{} // option -> the upper-case words after it
	for _, l := range strings.Split(string(help), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "--") {
			continue
		}
		n := 0
		for _, w := range f[1:] {
			if w != strings.ToUpper(w) || !strings.ContainsAny(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				break
			}
			n++
		}
		arity[f[0]] = n
	}
	if len(arity) < 20 {
		t.Fatalf("bwrap --help lists %d options:\n%s", len(arity), help)
	}
	for name, f := range flags {
		n, listed := arity[name]
		switch {
		case v.Less(f.since) && listed:
			t.Errorf("bwrap %s has %s, which the table dates %s", v, name, f.since)
		case !v.Less(f.since) && !listed:
			t.Errorf("bwrap %s lacks %s, which the table dates %s", v, name, f.since)
		case listed && n != f.args:
			t.Errorf("%s takes %d arguments in bwrap %s's --help, %d in the table", name, n, v, f.args)
		}
	}
}

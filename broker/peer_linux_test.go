package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRefusedHere: a host set to panic on a kernel warning, or one whose
// setting cannot be read, gets no kernel path; one that only logs them does.
func TestRefusedHere(t *testing.T) {
	for _, c := range []struct {
		name, value string
		refused     bool
	}{
		{"logs warnings", "0\n", false},
		{"panics on a warning", "1\n", true},
		{"cannot be read", "", true},
	} {
		root := t.TempDir()
		if c.value != "" {
			os.MkdirAll(filepath.Join(root, "sys/kernel"), 0o755)
			os.WriteFile(filepath.Join(root, "sys/kernel/panic_on_warn"), []byte(c.value), 0o644)
		}
		if why := refusedHere(root); (why != "") != c.refused {
			t.Errorf("%s: refusedHere = %q, want refused %v", c.name, why, c.refused)
		}
	}
}

// TestKernelPathSelfTest: on this host the kernel path is made, its
// self-test included (the redirected bytes arrive, poll shows them, and
// SIOCINQ counts them while unread: the broker's flow control reads it),
// and the self-test fails when the broker's end is left out of the map
// (the bytes then go by TCP). Without the privileges for a sockhash,
// there is nothing to test.
func TestKernelPathSelfTest(t *testing.T) {
	start := time.Now()
	k, err := newKernelPath()
	if errors.Is(err, unix.EPERM) {
		t.Skip("no sockhash without CAP_BPF:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	t.Logf("made in %v", time.Since(start))
	if err := k.try(false); err == nil || !strings.Contains(err.Error(), "not redirected") {
		t.Errorf("the self-test without the redirect: %v, want the bytes not redirected", err)
	}
}

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

// TestKernelQueue: the kernel path's queue limit is what TCP lets the
// jail socket's receive buffer and the broker's send buffer grow to,
// within its bounds, and a quarter of it (at most maxChunk) is a chunk; a
// setting that cannot be read counts as none.
func TestKernelQueue(t *testing.T) {
	for _, c := range []struct {
		name         string
		rmem, wmem   string // "" for a file that does not exist
		limit, chunk int
	}{
		{"Linux's defaults", "4096\t131072\t6291456\n", "4096\t16384\t4194304\n", 10 << 20, 10 << 18},
		{"raised (this project's test host)", "4096\t131072\t33554432\n", "4096\t16384\t4194304\n", maxQueue, maxChunk},
		{"lowered", "4096\t4096\t65536\n", "4096\t4096\t65536\n", minQueue, minQueue / 4},
		{"cannot be read", "", "", minQueue, minQueue / 4},
		{"not numbers", "a b c\n", "\n", minQueue, minQueue / 4},
	} {
		root := t.TempDir()
		dir := filepath.Join(root, "sys/net/ipv4")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, value := range map[string]string{"tcp_rmem": c.rmem, "tcp_wmem": c.wmem} {
			if value == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		q := hostQueue(root)
		if q.limit != c.limit || q.chunk != c.chunk {
			t.Errorf("%s: limit %d, chunk %d; want %d, %d", c.name, q.limit, q.chunk, c.limit, c.chunk)
		}
	}
	if q := hostQueue("/proc"); q.limit < minQueue || q.limit > maxQueue || q.chunk*4 > q.limit {
		t.Errorf("this host's queue: %+v", q)
	}
}

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSudoUserHomeIsProtected: a `~` path means that path under every home
// whose secrets are at stake, $SUDO_USER's included. An operator who ran
// `sudo agentjail run` keeps HOME=/root (sudo's default), yet their own
// ~/.netrc and ~/.ssh are what an agent would go for. The operator is a
// user that exists only in this test: agentjail runs in a private mount
// namespace whose /etc/passwd has one more line, so nothing on the host
// changes.
func TestSudoUserHomeIsProtected(t *testing.T) {
	jailed(t)
	home := filepath.Join(visibleDir(t), "home", "op")
	write(t, home, map[string]string{
		".netrc":      "machine example.com password netrc-secret\n",
		".ssh/id_rsa": "ssh-secret\n",
	})
	hosts, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, append(hosts, "ajsudo-op:x:4321:4321::"+home+":/bin/sh\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	inNS := invocation{
		wrap: []string{"unshare", "--mount", "--propagation", "private",
			"sh", "-c", `mount --bind "$0" /etc/passwd && exec "$@"`, passwd},
	}
	read := []string{"run", "--profile", "tier1", "--", "sh", "-c",
		"cat " + home + "/.netrc " + home + "/.ssh/id_rsa 2>&1; true"}

	// The control: with the operator unknown, their files are plain files
	// of a visible directory, and the agent reads them. Without it the
	// test below could pass because the files were out of sight anyway.
	inNS.env = []string{"HOME=/root"}
	r := inNS.run(t, read...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "netrc-secret") || !strings.Contains(r.stdout, "ssh-secret") {
		t.Fatalf("control: the agent could not read the files of a home agentjail does not know:\n%s\n%s", r.stdout, r.stderr)
	}

	// No $SUDO_UID: the run user stays nobody, so only $SUDO_USER's home
	// (not the run user's) can be what protects the files.
	inNS.env = []string{"HOME=/root", "SUDO_USER=ajsudo-op"}
	r = inNS.run(t, read...)
	wantCode(t, r, 0)
	for _, secret := range []string{"netrc-secret", "ssh-secret"} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("the agent read %s from $SUDO_USER's home:\n%s", secret, r.stdout)
		}
	}
}

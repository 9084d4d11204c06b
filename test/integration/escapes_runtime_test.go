package integration

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEscapeUserRuntimeSockets: a read-only bind does not stop connect(2)
// to a socket file, and the run user's runtime directory holds live ones
// (the session bus, gpg-agent, ssh-agent, rootless Docker). Under plain
// bwrap the agent reaches a service listening there; under agentjail
// /run/user is covered.
func TestEscapeUserRuntimeSockets(t *testing.T) {
	jailed(t)
	userDir := userRuntimeDir(t)
	sock := filepath.Join(userDir, "agentjail-test-"+token()+".sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chown(sock, runUID, runUID)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOST-SIDE-SERVICE\n"))
			c.Close()
		}
	}()
	connect := []string{"socat", "-u", "UNIX-CONNECT:" + sock, "-"}

	c := plainBwrap{cred: uid1000}.run(t, connect...)
	holeShown(t, strings.Contains(c.stdout, "HOST-SIDE-SERVICE"), "a host service reached through a socket in /run/user", c)

	for _, profile := range []string{"tier1", "tier3", "sealed"} {
		r := aj(t, append([]string{"run", "--profile", profile, "--user", strconv.Itoa(runUID), "--"}, connect...)...)
		if strings.Contains(r.stdout, "HOST-SIDE-SERVICE") || r.code == 0 {
			t.Errorf("%s: the agent reached the host service at %s (exit %d):\n%s%s", profile, sock, r.code, r.stdout, r.stderr)
		}
	}
}

// TestEscapeRunDirectoryInTheJail: a non-root operator's runs share one
// owner, and their run directory ($XDG_RUNTIME_DIR/agentjail here) holds
// every run's Claude directory and control socket. Under plain
// bwrap an agent lists it; under agentjail the directory is covered.
func TestEscapeRunDirectoryInTheJail(t *testing.T) {
	jailed(t)
	xdg := visibleDir(t) // the operator's (uid 1000) runtime directory
	os.Chmod(xdg, 0o700)
	ws := workspace(t)
	inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
	runDir := filepath.Join(xdg, "agentjail")
	r := inv.run(t, "run", "--write", ws, "--", "sh", "-c", "ls "+runDir+"/runs; echo listed=$?")
	wantCode(t, r, 0)
	if !fileExists(filepath.Join(runDir, "runs")) {
		t.Fatalf("agentjail keeps its run directory elsewhere than %s; the test proves nothing", runDir)
	}
	c := plainBwrap{cred: uid1000}.run(t, "sh", "-c", "ls "+runDir+"/runs >/dev/null; echo listed=$?")
	holeShown(t, strings.Contains(c.stdout, "listed=0"), "the run directory listed from a jail", c)
	if !strings.Contains(r.stdout, "listed=2") {
		t.Errorf("the agent listed agentjail's run directory:\n%s%s", r.stdout, r.stderr)
	}
}

// TestRunDirectoryThereForTheGitMask: the mask over a missing .git names
// agentjail's run directory, which must be there in the jail, empty (Codex
// logs an error for a gitdir that does not exist, many times a run). A
// non-root operator's run directory lay under the jail's /tmp, or under
// the denied /run/user: missing. Now it is there wherever it lies, as an
// empty directory no one may enter, and /run/user still cannot be listed.
func TestRunDirectoryThereForTheGitMask(t *testing.T) {
	jailed(t)
	userDir := userRuntimeDir(t)
	const probe = `read -r _ g < .git; echo "gitdir=$g"; [ -d "$g" ] && echo there; ls "$g" >/dev/null 2>&1 || echo unlisted; ls /run/user >/dev/null 2>&1 || echo run-user-unlisted`
	for _, xdg := range []string{userDir, ""} {
		ws := workspace(t)
		inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + xdg}}
		r := inv.run(t, "run", "--write", ws, "--", "sh", "-c", probe)
		wantCode(t, r, 0)
		want := filepath.Join(xdg, "agentjail")
		if xdg == "" {
			want = filepath.Join(os.TempDir(), "agentjail-"+strconv.Itoa(runUID))
		}
		got := lines(r.stdout)
		if got["gitdir"] != want || !strings.Contains(r.stdout, "\nthere\n") || !strings.Contains(r.stdout, "\nunlisted\n") || !strings.Contains(r.stdout, "run-user-unlisted") {
			t.Errorf("XDG_RUNTIME_DIR=%q: want the gitdir %s there, not listable, and /run/user not listable:\n%s%s", xdg, want, r.stdout, r.stderr)
		}
	}
}

// userRuntimeDir returns the run user's runtime directory, made as logind
// makes them where they are missing (a machine without logind has
// neither): /run/user root's and open to all, the user's own directory
// theirs alone (MkdirAll would make /run/user 0700 too, which the user
// could not pass). /run/user stays: the jails of the tests running beside
// this one cover it when it exists, and bwrap cannot make the mount point
// again on their read-only root.
func userRuntimeDir(t *testing.T) string {
	t.Helper()
	userDir := filepath.Join("/run/user", strconv.Itoa(runUID))
	for _, d := range []struct {
		path string
		mode os.FileMode
		uid  int
	}{{"/run/user", 0o755, 0}, {userDir, 0o700, runUID}} {
		if fileExists(d.path) {
			continue
		}
		if err := os.Mkdir(d.path, d.mode); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if d.path == userDir {
			t.Cleanup(func() { os.RemoveAll(d.path) })
		}
		os.Chmod(d.path, d.mode) // whatever the umask
		os.Chown(d.path, d.uid, d.uid)
	}
	return userDir
}

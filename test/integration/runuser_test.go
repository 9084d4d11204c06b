package integration

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunUserRule checks each branch of the run-user rule: --user, the
// profile's user, $SUDO_UID, the owner of the start directory, nobody, and
// the invoking user when that is not root.
func TestRunUserRule(t *testing.T) {
	jailed(t)
	owned := visibleDir(t) // owned by runUID, visible in the jail
	profiles := workspace(t)
	write(t, profiles, map[string]string{"as-nobody.yaml": "extends: tier1\nuser: nobody\n"})
	id := []string{"--", "sh", "-c", "id -u; id -g"}
	for _, c := range []struct {
		name string
		inv  invocation
		args []string
		want string
	}{
		{"--user", invocation{dir: owned}, []string{"--user", "4242"}, "4242\n4242\n"},
		{"profile user", invocation{dir: owned}, []string{"--profile", filepath.Join(profiles, "as-nobody.yaml")}, "65534\n65534\n"},
		{"$SUDO_UID", invocation{env: []string{"SUDO_UID=1234", "SUDO_GID=5678", "SUDO_USER=someone"}}, nil, "1234\n5678\n"},
		{"start directory owner", invocation{dir: owned}, nil, "1000\n1000\n"},
		{"--chdir owner", invocation{}, []string{"--chdir", owned}, "1000\n1000\n"},
		{"nobody", invocation{dir: "/"}, nil, "65534\n65534\n"},
		{"non-root caller", invocation{dir: owned, env: []string{"HOME=/"}, cred: &syscall.Credential{Uid: 1000, Gid: 1000}}, nil, "1000\n1000\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.inv.run(t, append(append([]string{"run"}, c.args...), id...)...)
			wantCode(t, r, 0)
			if r.stdout != c.want {
				t.Errorf("ran as %q, want %q (stderr %s)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

func TestRunUserRefusals(t *testing.T) {
	jailed(t)
	owned := workspace(t)
	for _, c := range []struct {
		name string
		inv  invocation
		args []string
		want string
	}{
		{"root in a free profile", invocation{}, []string{"--user", "root"}, "user: uid 0 is allowed only with inner_sandbox: sealed"},
		{"uid 0 in a free profile", invocation{}, []string{"--user", "0"}, "uid 0 is allowed only with inner_sandbox: sealed"},
		{"unknown user", invocation{}, []string{"--user", "no-such-user-here"}, `run user "no-such-user-here" (chosen by --user) does not exist`},
		{"non-root asking for another user", invocation{dir: owned, env: []string{"HOME=/"}, cred: &syscall.Credential{Uid: 1000, Gid: 1000}}, []string{"--user", "4242"},
			"cannot run as 4242 (uid 4242, chosen by --user): agentjail was started by uid 1000 without root"},
		{"unwritable root", invocation{}, []string{"--user", "4242", "--write", owned},
			"is not writable by the run user 4242 (uid 4242); fix with `chown -R 4242:4242"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(owned, strings.ReplaceAll(c.name, " ", "-"))
			r := c.inv.run(t, append(append([]string{"run"}, c.args...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}
}

func TestSealedRootIsCaplessAndCannotWriteSysctls(t *testing.T) {
	jailed(t)
	r := aj(t, "run", "--profile", "sealed", "--user", "root", "--", "sh", "-c", `
		id -u
		grep -E '^(CapEff|NoNewPrivs)' /proc/self/status
		cat /proc/sys/vm/swappiness > /proc/sys/vm/swappiness 2>/dev/null && echo WROTE-SYSCTL
		unshare -Ur true 2>/dev/null && echo NESTED-USERNS
		true`)
	wantCode(t, r, 0)
	for _, want := range []string{"0\n", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sealed root: stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{"WROTE-SYSCTL", "NESTED-USERNS"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("sealed root: %s\n%s", bad, r.stdout)
		}
	}
}

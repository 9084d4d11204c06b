package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/seccomp"
)

// dockerDefaultCaps is the capability set Docker gives a container.
var dockerDefaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// runcWithSeccomp runs `agentjail run --profile tier1 -- bwrap ... true`
// as root in a runc container with Docker's default capabilities (no
// CAP_SYS_ADMIN), an unmasked /proc (systempaths=unconfined) and the given
// seccomp profile. runc's own loader validates the profile. The rootfs is
// a plain (non-recursive) bind of /, as in NESTING.md.
func runcWithSeccomp(t *testing.T, id string, profile []byte) (string, error) {
	t.Helper()
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("/", rootfs, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(rootfs, syscall.MNT_DETACH) })
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var sec any
	if err := json.Unmarshal(profile, &sec); err != nil {
		t.Fatal(err)
	}
	c["root"] = map[string]any{"path": "rootfs", "readonly": true}
	caps := map[string]any{"bounding": dockerDefaultCaps, "effective": dockerDefaultCaps, "permitted": dockerDefaultCaps}
	c["process"] = map[string]any{
		"terminal": false, "user": map[string]any{"uid": 0, "gid": 0}, "cwd": "/", "capabilities": caps,
		"env":  []string{"PATH=/usr/bin:/bin"},
		"args": []string{"/aj/agentjail", "run", "--profile", "tier1", "--user", strconv.Itoa(runUID), "--", "bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--unshare-net", "--proc", "/proc", "--dev", "/dev", "true"},
	}
	mounts := []any{}
	for _, m := range c["mounts"].([]any) {
		if m.(map[string]any)["type"] != "cgroup" {
			mounts = append(mounts, m)
		}
	}
	for _, d := range []string{"/run", "/var/cache", "/tmp"} {
		mounts = append(mounts, map[string]any{"destination": d, "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=755"}})
	}
	mounts = append(mounts, map[string]any{"destination": "/aj", "type": "bind", "source": filepath.Dir(agentjail), "options": []string{"rbind", "ro"}})
	c["mounts"] = mounts
	linux := c["linux"].(map[string]any)
	linux["seccomp"] = sec
	delete(linux, "maskedPaths") // systempaths=unconfined: a fresh /proc needs a fully visible one
	delete(linux, "readonlyPaths")
	if data, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "agentjail-it-" + id + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.Command("runc", "run", "--bundle", bundle, name)
	t.Cleanup(func() { exec.Command("runc", "delete", "--force", name).Run() })
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestForContainerProfile: under `export --for-container`, agentjail and an
// inner bwrap work in a container without CAP_SYS_ADMIN; under Docker's
// default profile (resolved for those capabilities) they do not.
func TestForContainerProfile(t *testing.T) {
	jailed(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc is not installed (make deps installs it): %v", err)
	}
	r := aj(t, "seccomp", "export", "--for-container")
	wantCode(t, r, 0)
	if out, err := runcWithSeccomp(t, "for-container", []byte(r.stdout)); err != nil {
		t.Fatalf("agentjail with an inner bwrap failed under the --for-container profile: %v\n%s", err, out)
	}

	docker, err := os.ReadFile("../../seccomp/testdata/external/docker-default.json")
	if err != nil {
		t.Skipf("%v: run `make test` to fetch Docker's default profile", err)
	}
	h := seccomp.CurrentHost()
	h.Caps = dockerDefaultCaps
	f, err := seccomp.Import("docker-default.json", docker, h)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := seccomp.Export(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runcWithSeccomp(t, "docker-default", resolved)
	if err == nil {
		t.Fatal("agentjail built its jail under Docker's default profile; the control shows nothing")
	}
	t.Logf("under Docker's default profile: %s", out)
	if !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "No permissions to create new namespace") {
		t.Errorf("failed for another reason than the filter:\n%s", out)
	}
}

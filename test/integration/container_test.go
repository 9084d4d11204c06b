package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/doctor"
	"github.com/agentjail/agentjail/seccomp"
)

// dockerDefaultResolved is Docker's default seccomp profile (as Debian's
// docker.io ships it, fetched by `make test`) resolved for Docker's default
// capabilities on this host: what a container gets with no --cap-add.
func dockerDefaultResolved(t *testing.T) []byte {
	t.Helper()
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
	return resolved
}

// dockerDefaultCaps is the capability set Docker gives a container.
var dockerDefaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// dockerMaskedPaths and dockerReadonlyPaths are what Docker masks and
// makes read-only in a container's /proc and /sys unless it runs with
// --security-opt systempaths=unconfined (moby oci/defaults.go).
var (
	dockerMaskedPaths   = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	dockerReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// container is a runc container built as a container engine builds one:
// the rootfs a plain, read-only bind of / (a recursive bind would carry a
// fully visible host /proc underneath and hide the masks: docs/nesting.md,
// What was measured), its own /proc, tmpfs on /run, /var/cache and /tmp,
// agentjail's binary at /aj/agentjail, no cgroup mount (runc spec's cgroup
// mount fails here).
type container struct {
	args    []string
	env     []string // besides PATH
	seccomp []byte   // OCI seccomp profile; nil: none
	uid     uint32
	caps    []string // bounding, effective and permitted
	// noNewPrivileges is Kubernetes' allowPrivilegeEscalation: false.
	noNewPrivileges bool
	// masked keeps Docker's default masked and read-only paths; false is
	// systempaths=unconfined (Kubernetes: procMount: Unmasked).
	masked bool
	binds  []string // host directories bound read-write at the same path
}

// run runs the container under runc and returns what it printed and its
// exit code. It fails the test if runc itself fails or the container does
// not finish within two minutes.
func (c container) run(t *testing.T, id string) result {
	t.Helper()
	return c.start(t, id).wait(t)
}

// runningContainer is a container whose `runc run` has started.
type runningContainer struct {
	name           string
	cmd            *exec.Cmd
	ctx            context.Context
	cancel         context.CancelFunc
	stdout, stderr *bytes.Buffer
}

// start starts the container under runc; wait collects it.
func (c container) start(t *testing.T, id string) *runningContainer {
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
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["root"] = map[string]any{"path": "rootfs", "readonly": true}
	caps := map[string]any{"bounding": c.caps, "effective": c.caps, "permitted": c.caps}
	cfg["process"] = map[string]any{
		"terminal": false, "user": map[string]any{"uid": c.uid, "gid": c.uid}, "cwd": "/", "capabilities": caps,
		"noNewPrivileges": c.noNewPrivileges,
		"env":             append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, c.env...),
		"args":            c.args,
	}
	mounts := []any{}
	for _, m := range cfg["mounts"].([]any) {
		if m.(map[string]any)["type"] != "cgroup" {
			mounts = append(mounts, m)
		}
	}
	for _, d := range []string{"/run", "/var/cache", "/tmp"} {
		mounts = append(mounts, map[string]any{"destination": d, "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}})
	}
	mounts = append(mounts, map[string]any{"destination": "/aj", "type": "bind", "source": filepath.Dir(agentjail), "options": []string{"rbind", "ro"}})
	for _, d := range c.binds {
		mounts = append(mounts, map[string]any{"destination": d, "type": "bind", "source": d, "options": []string{"rbind", "rw"}})
	}
	cfg["mounts"] = mounts
	linux := cfg["linux"].(map[string]any)
	delete(linux, "seccomp")
	if c.seccomp != nil {
		var sec any
		if err := json.Unmarshal(c.seccomp, &sec); err != nil {
			t.Fatal(err)
		}
		linux["seccomp"] = sec
	}
	linux["maskedPaths"], linux["readonlyPaths"] = []string{}, []string{}
	if c.masked {
		linux["maskedPaths"], linux["readonlyPaths"] = dockerMaskedPaths, dockerReadonlyPaths
	}
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runningContainer{name: "agentjail-it-" + id + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	r.ctx, r.cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	r.cmd = exec.CommandContext(r.ctx, "runc", "run", "--bundle", bundle, r.name)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	t.Cleanup(func() { exec.Command("runc", "delete", "--force", r.name).Run() })
	if err := r.cmd.Start(); err != nil {
		r.cancel()
		t.Fatalf("runc run: %v", err)
	}
	return r
}

func (r *runningContainer) wait(t *testing.T) result {
	t.Helper()
	defer r.cancel()
	err := r.cmd.Wait()
	if r.ctx.Err() != nil {
		t.Fatalf("container %s did not finish in two minutes:\n%s\n%s", r.name, r.stdout.String(), r.stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("runc run: %v", err)
	}
	return result{r.stdout.String(), r.stderr.String(), code}
}

// runcWithSeccomp runs `agentjail run --profile tier1 -- bwrap ... true`
// as root in a container with Docker's default capabilities (no
// CAP_SYS_ADMIN), an unmasked /proc (systempaths=unconfined) and the given
// seccomp profile. runc's own loader validates the profile.
func runcWithSeccomp(t *testing.T, id string, profile []byte) (string, error) {
	t.Helper()
	r := container{
		args:    []string{"/aj/agentjail", "run", "--profile", "tier1", "--user", strconv.Itoa(runUID), "--", "bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--unshare-net", "--proc", "/proc", "--dev", "/dev", "true"},
		seccomp: profile,
		caps:    dockerDefaultCaps,
	}.run(t, id)
	if r.code != 0 {
		return r.stdout + r.stderr, fmt.Errorf("exit status %d", r.code)
	}
	return r.stdout + r.stderr, nil
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

	resolved := dockerDefaultResolved(t)
	out, err := runcWithSeccomp(t, "docker-default", resolved)
	if err == nil {
		t.Fatal("agentjail built its jail under Docker's default profile; the control shows nothing")
	}
	t.Logf("under Docker's default profile: %s", out)
	if !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "No permissions to create new namespace") {
		t.Errorf("failed for another reason than the filter:\n%s", out)
	}
}

// containerUsers are the two ways the container runs agentjail: as root
// with Docker's default capabilities (agentjail then runs the jail as the
// run user), and as the image and the Kubernetes manifests run it — uid
// 1000, no capabilities, no new privileges.
var containerUsers = []struct {
	name string
	c    container
}{
	{"root with Docker's capabilities", container{uid: 0, caps: dockerDefaultCaps}},
	{"uid 1000 without capabilities", container{uid: runUID, caps: []string{}, noNewPrivileges: true, env: []string{"HOME=/tmp"}}},
}

// pid1 makes agentjail the container's init, as the image's ENTRYPOINT
// (agentjail init --) does.
var pid1 = []string{"/aj/agentjail", "init", "--"}

// forContainer is `agentjail seccomp export --for-container`.
func forContainer(t *testing.T) []byte {
	t.Helper()
	r := aj(t, "seccomp", "export", "--for-container")
	wantCode(t, r, 0)
	return []byte(r.stdout)
}

// TestContainerUnmaskedProc is docs/containers.md's setup: the exported
// seccomp profile and an unmasked /proc (systempaths=unconfined,
// procMount: Unmasked). agentjail builds its jail with a fresh /proc, and
// inside it the agent's own sandbox works: a user namespace, a bwrap with
// its own fresh /proc and network, loopback up. tier1 is a proxy jail, and
// its broker works there: it answers its ping through $HTTP_PROXY, and
// takes a request to an allowed host (a server on the container's
// loopback, outside the jail) there, while a direct connection to it
// fails (the jail's loopback is its own).
func TestContainerUnmaskedProc(t *testing.T) {
	jailed(t)
	profile := forContainer(t)
	const body = "reached-through-the-broker"
	columns := slices.Concat(innerColumns, []innerColumn{
		{"the broker's ping through $HTTP_PROXY", `curl -sS -m 20 "$HTTP_PROXY/agentjail/ping"`},
		{"an allowed host through the broker", "curl -sS -m 20 --noproxy '' http://127.0.0.1:8765/"},
		{"the allowed host directly", "curl -sS -m 20 --noproxy '*' http://127.0.0.1:8765/"},
	})
	want := []string{"", "", "", "agentjail broker", body, ""}
	// A server on the container's loopback, which the jail's is not.
	serve := `mkdir /tmp/www && echo ` + body + ` > /tmp/www/index.html
python3 -m http.server 8765 --bind 127.0.0.1 --directory /tmp/www >/dev/null 2>&1 &
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8765/ && break; sleep 0.1; done
exec "$@"`
	for _, u := range containerUsers {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			c := u.c
			c.seccomp = profile
			c.args = slices.Concat(pid1, []string{"sh", "-c", serve, "sh",
				"/aj/agentjail", "run", "--profile", "tier1", "--user", strconv.Itoa(runUID), "--allow-net", "127.0.0.1:8765", "--", "sh", "-c", innerScript(columns)})
			r := c.run(t, "unmasked")
			wantCode(t, r, 0)
			if strings.Contains(r.stderr, "degraded: jail:") {
				t.Errorf("degraded with an unmasked /proc:\n%s", r.stderr)
			}
			for i, res := range parseInner(t, r.stdout, len(columns)) {
				if direct := i == len(columns)-1; (res.exit != 0) != direct || !strings.Contains(res.output, want[i]) {
					t.Errorf("%s: exit %d:\n%s", columns[i].name, res.exit, res.output)
				}
			}
		})
	}
}

// TestContainerMaskedProc is a container run with Docker's default masked
// and read-only /proc paths: doctor names the cause and the fixes, a run
// fails closed before starting anything, and a profile that allows the
// fallback runs degraded, says so, and the agent's own sandbox works only
// in its weaker mode.
func TestContainerMaskedProc(t *testing.T) {
	jailed(t)
	profile := forContainer(t)
	for _, u := range containerUsers {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			dir, weak := workspace(t), weakProfile(t)
			c := u.c
			c.seccomp, c.masked, c.binds = profile, true, []string{dir, filepath.Dir(weak)}
			user := []string{"--user", strconv.Itoa(runUID)}

			c.args = append([]string{"/aj/agentjail", "doctor", "--json"}, user...)
			r := c.run(t, "masked-doctor")
			rep := failedDoctor(t, r)
			hp := check(t, rep, "host-proc")
			for _, want := range []string{"/proc/timer_list", "/proc/sys", "refuse to start"} {
				if !strings.Contains(hp.Detail, want) {
					t.Errorf("host-proc detail lacks %q: %+v", want, hp)
				}
			}
			for _, want := range []string{"--security-opt systempaths=unconfined", "procMount: Unmasked", "hostUsers: false", "proc: fresh-or-bind"} {
				if !strings.Contains(hp.Fix, want) {
					t.Errorf("host-proc fix lacks %q: %+v", want, hp)
				}
			}
			if hp.Status != doctor.Fail || !strings.Contains(hp.Cause, "maskedPaths") {
				t.Errorf("host-proc: %+v", hp)
			}
			if j := check(t, rep, "jail"); j.Status != doctor.Fail {
				t.Errorf("jail: %+v", j)
			}

			marker, closedRec := filepath.Join(dir, "ran"), filepath.Join(dir, "closed.json")
			c.args = slices.Concat(pid1, []string{"/aj/agentjail", "run", "--record", closedRec, "--write", dir}, user, []string{"--", "touch", marker})
			r = c.run(t, "masked-run")
			wantCode(t, r, 125)
			for _, want := range []string{"cannot mount a fresh /proc in the jail", "/proc/timer_list", "run `agentjail doctor`"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if fileExists(marker) {
				t.Error("the command ran although the run failed closed")
			}
			if rec := readRecord(t, closedRec, 125); rec.Reason != "setup_failed" || !strings.Contains(rec.Error, "cannot mount a fresh /proc in the jail") {
				t.Errorf("record of the run that failed closed: %+v", rec)
			}

			cols := []innerColumn{
				{"inner unshare -Ur true", "unshare -Ur true"},
				{"inner bwrap with a fresh /proc", innerColumns[1].cmd},
				{"inner bwrap binding /proc", "bwrap --ro-bind / / --unshare-user --unshare-pid --bind /proc /proc --dev /dev true"},
				{"masked path stays masked", "test ! -s /proc/timer_list"},
				{"the container's processes show: pid 1 is agentjail init (handed over to agentjail-init)", `{ tr '\0' ' ' </proc/1/cmdline | grep -q "^agentjail-init --grace=.* -- "; }`},
			}
			rec := filepath.Join(dir, "degraded.json")
			c.args = slices.Concat(pid1, []string{"/aj/agentjail", "run", "--record", rec, "--profile", weak}, user, []string{"--", "sh", "-c", innerScript(cols)})
			r = c.run(t, "masked-fallback")
			wantCode(t, r, 0)
			if !strings.Contains(r.stderr, "agentjail: degraded: jail: no fresh /proc") || !strings.Contains(r.stderr, "/proc/timer_list") {
				t.Errorf("stderr does not name the degradation:\n%s", r.stderr)
			}
			for i, want := range []bool{true, false, true, true, true} {
				if got := parseInner(t, r.stdout, len(cols))[i]; (got.exit == 0) != want {
					t.Errorf("%s: exit %d, want success %v:\n%s", cols[i].name, got.exit, want, got.output)
				}
			}
			degraded := false
			for _, d := range readRecord(t, rec, 0).Degradations {
				degraded = degraded || d.What == "jail" && strings.Contains(d.Detail, "no fresh /proc") && strings.Contains(d.Detail, "/proc/timer_list")
			}
			if !degraded {
				t.Errorf("the record does not list the degradation: %+v", readRecord(t, rec, 0).Degradations)
			}
		})
	}
}

// TestContainerDockerSeccompDoctor: under Docker's default seccomp profile
// (resolved for its default capabilities), doctor in the container says a
// seccomp filter refuses the namespaces and names the exported profile.
func TestContainerDockerSeccompDoctor(t *testing.T) {
	jailed(t)
	resolved := dockerDefaultResolved(t)
	c := containerUsers[1].c
	c.seccomp = resolved
	c.args = []string{"/aj/agentjail", "doctor", "--json"}
	r := c.run(t, "docker-seccomp-doctor")
	rep := failedDoctor(t, r)
	if sc := check(t, rep, "seccomp"); sc.Status != doctor.Warn || !strings.Contains(sc.Fix, "agentjail seccomp export --for-container") {
		t.Errorf("seccomp: %+v", sc)
	}
	j := check(t, rep, "jail")
	if j.Status != doctor.Fail || !strings.Contains(j.Cause, "seccomp filter on agentjail's own process refuses to create namespaces") ||
		!strings.Contains(j.Fix, "--security-opt seccomp=FILE") || !strings.Contains(j.Fix, "agentjail seccomp export --for-container") {
		t.Errorf("jail: %+v", j)
	}
}

// TestContainerStop is `docker stop` and a pod's termination: SIGTERM to
// the container's PID 1, agentjail init, reaches the run, which ends its
// jail, and the container exits by itself (no SIGKILL is ever sent) with
// the run's exit code for SIGTERM.
func TestContainerStop(t *testing.T) {
	jailed(t)
	dir := workspace(t)
	marker := filepath.Join(dir, "started")
	c := containerUsers[1].c
	c.seccomp, c.binds = forContainer(t), []string{dir}
	c.args = slices.Concat(pid1, []string{"/aj/agentjail", "run", "--write", dir, "--", "sh", "-c", "touch " + marker + "; exec sleep 600"})
	running := c.start(t, "stop")
	waitFor(t, func() bool { return fileExists(marker) })
	if out, err := exec.Command("runc", "kill", running.name, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill: %v\n%s", err, out)
	}
	r := running.wait(t)
	if r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d (the run ended by SIGTERM)\nstdout:\n%s\nstderr:\n%s", r.code, 128+int(syscall.SIGTERM), r.stdout, r.stderr)
	}
}

// failedDoctor decodes `agentjail doctor --json`'s report, which must say
// the host fails (exit 1, ok false).
func failedDoctor(t *testing.T, r result) doctor.Report {
	t.Helper()
	rep := decodeDoctor(t, r)
	if r.code != 1 || rep.OK {
		t.Errorf("doctor: exit %d, ok %v; want 1, false", r.code, rep.OK)
	}
	return rep
}

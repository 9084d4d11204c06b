package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// seccompEnv builds the probe (testdata/probe) into a directory every jail
// sees (outside the tier profiles' tmpfs /tmp), and a control profile that
// differs from a jail only by having no seccomp filter.
type seccompEnv struct{ dir, probe, control string }

func newSeccompEnv(t *testing.T) seccompEnv {
	t.Helper()
	dir := visibleDir(t)
	e := seccompEnv{dir: dir, probe: filepath.Join(dir, "probe"), control: filepath.Join(dir, "control.yaml")}
	if err := buildTool(e.probe, "probe"); err != "" {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"control.yaml": "description: the same jail without a seccomp filter\nseccomp:\n  default: false\nenvironment:\n  allow: [PATH]\nlimits:\n  pids: 4096\n  memory: 1GiB\nfilesystem:\n  tmpfs:\n    /tmp: {size: 64MiB}\n"})
	return e
}

var probeOnce struct {
	sync.Once
	path, err string
}

// sharedProbe is one build of the probe for the whole test binary, beside
// the binaries TestMain built (a directory every jail sees, removed at the
// end).
func sharedProbe(t *testing.T) string {
	t.Helper()
	probeOnce.Do(func() {
		probeOnce.path = filepath.Join(filepath.Dir(agentjail), "probe")
		probeOnce.err = buildTool(probeOnce.path, "probe")
	})
	if probeOnce.err != "" {
		t.Fatal(probeOnce.err)
	}
	return probeOnce.path
}

// buildTool builds testdata/NAME as path; it returns what went wrong, or
// "".
func buildTool(path, name string) string {
	if out, err := exec.Command("go", "build", "-o", path, "./testdata/"+name).CombinedOutput(); err != nil {
		return fmt.Sprintf("build %s: %v\n%s", name, err, out)
	}
	return ""
}

// probeResults parses the probe's NAME=RESULT lines.
func probeResults(t *testing.T, r result) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// TestSeccompKernel proves the kernel enforces what the BPF-VM tests check
// in userspace, one group at a time, against a control run that has the
// same jail and no filter.
func TestSeccompKernel(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)

	t.Run("denials", func(t *testing.T) {
		t.Parallel()
		// i386 int 0x80, x32 and io_uring are TestEscapeAlternateABIs';
		// TIOCSTI on a real terminal is TestEscapeTTYInjection's.
		calls := []string{"ptrace", "keyctl", "tiocsti", "tiocsti-high", "tioclinux", "tcgets"}
		control := aj(t, append([]string{"run", "--profile", e.control, "--", e.probe}, calls...)...)
		wantCode(t, control, 0)
		jail := aj(t, append([]string{"run", "--profile", "tier1", "--", e.probe}, calls...)...)
		wantCode(t, jail, 0)
		c, j := probeResults(t, control), probeResults(t, jail)
		for call, want := range map[string][2]string{
			"ptrace":       {"ok", "EPERM"},
			"keyctl":       {"ok", "EPERM"},
			"tiocsti":      {"EBADF", "EPERM"},
			"tiocsti-high": {"EBADF", "EPERM"}, // (0x123 << 32) | TIOCSTI, CVE-2019-10063
			"tioclinux":    {"EBADF", "EPERM"},
			"tcgets":       {"EBADF", "EBADF"}, // other ioctls pass
		} {
			if c[call] != want[0] || j[call] != want[1] {
				t.Errorf("%s: without the filter %q (want %q), in tier1 %q (want %q)", call, c[call], want[0], j[call], want[1])
			}
		}
	})

	innerBwrap := []string{"bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--unshare-net", "--proc", "/proc", "--dev", "/dev", "true"}
	for _, profile := range []string{"tier1", "tier2", "tier3"} {
		t.Run("inner-sandbox-free-"+profile, func(t *testing.T) {
			t.Parallel()
			wantCode(t, aj(t, "run", "--profile", profile, "--", "unshare", "-Ur", "true"), 0)
			wantCode(t, aj(t, append([]string{"run", "--profile", profile, "--"}, innerBwrap...)...), 0)
		})
	}
	t.Run("inner-sandbox-sealed", func(t *testing.T) {
		t.Parallel()
		r := aj(t, "run", "--profile", "sealed", "--", "unshare", "-Ur", "true")
		if r.code == 0 {
			t.Fatal("unshare -Ur succeeded in a sealed jail")
		}
		// EPERM is the filter's answer; --disable-userns alone would
		// answer ENOSPC (docs/nesting.md, What was measured).
		if !strings.Contains(r.stderr, "Operation not permitted") {
			t.Errorf("unshare was not refused by the filter:\n%s", r.stderr)
		}
		// bwrap words the filter's EPERM as "No permissions to create new
		// namespace" (refused() in nesting_test.go also accepts ENOSPC,
		// which would be --disable-userns, not the filter).
		if r := aj(t, append([]string{"run", "--profile", "sealed", "--"}, innerBwrap...)...); r.code == 0 ||
			!strings.Contains(r.stderr, "No permissions to creat") {
			t.Errorf("an inner bwrap was not refused by the filter in a sealed jail (exit %d):\n%s", r.code, r.stderr)
		}
	})

	t.Run("docker-format-file", func(t *testing.T) {
		t.Parallel()
		ws := workspace(t)
		profile := filepath.Join(e.dir, "deny-mkdir.json")
		write(t, e.dir, map[string]string{"deny-mkdir.json": `{
			"defaultAction": "SCMP_ACT_ALLOW",
			"archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86"]},
			            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}],
			"syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13, "comment": "no new directories"},
			             {"names": ["ptrace"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_PTRACE"]}}]}`})
		r := aj(t, "run", "--seccomp", profile, "--write", ws, "--chdir", ws, "--", "mkdir", filepath.Join(ws, "made"))
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") || fileExists(filepath.Join(ws, "made")) {
			t.Errorf("mkdir was not refused with EACCES (exit %d):\n%s", r.code, r.stderr)
		}
		// The profile's own filter still applies on top.
		j := probeResults(t, aj(t, "run", "--seccomp", profile, "--", e.probe, "ptrace"))
		if j["ptrace"] != "EPERM" {
			t.Errorf("ptrace under tier1 plus the file: %q, want EPERM", j["ptrace"])
		}
		wantCode(t, aj(t, "run", "--write", ws, "--chdir", ws, "--", "mkdir", filepath.Join(ws, "made")), 0)
	})

	t.Run("export-round-trip", func(t *testing.T) {
		t.Parallel()
		r := aj(t, "seccomp", "export", "--profile", "tier1")
		wantCode(t, r, 0)
		var s specs.LinuxSeccomp
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("export is not strict OCI: %v\n%s", err, r.stdout)
		}
		exported := filepath.Join(e.dir, "tier1.json")
		write(t, e.dir, map[string]string{"tier1.json": r.stdout})
		// Imported back as the only filter, it refuses what tier1 refuses.
		j := probeResults(t, aj(t, "run", "--profile", e.control, "--seccomp", exported, "--", e.probe, "ptrace", "tiocsti-high"))
		if j["ptrace"] != "EPERM" || j["tiocsti-high"] != "EPERM" {
			t.Errorf("the exported tier1 filter, imported back: %v", j)
		}
	})
}

// TestSeccompBadInput: malformed JSON, an unknown syscall or action is exit
// 125 naming the file and the culprit, and the command never runs.
func TestSeccompBadInput(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	files := map[string]string{
		"malformed.json":  "{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"syscalls\": [\n",
		"badsyscall.json": "{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"syscalls\": [\n  {\"names\": [\"mkdir\",\n             \"mkdri\"], \"action\": \"SCMP_ACT_ERRNO\"}]}",
		"badaction.json":  "{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"syscalls\": [{\"names\": [\"mkdir\"],\n               \"action\": \"SCMP_ACT_DENY\"}]}",
		"baddefault.json": `{"defaultAction": "SCMP_ACT_PERMIT"}`,
		"badarch.json":    `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_Z80"]}`,
		"unknownkey.json": `{"defaultAction": "SCMP_ACT_ALLOW", "sycalls": []}`,
	}
	write(t, dir, files)
	for file, says := range map[string]string{
		"malformed.json":  "malformed.json:3:1",
		"badsyscall.json": `badsyscall.json:4:14: syscalls[0].names[1]: unknown syscall "mkdri"`,
		"badaction.json":  `badaction.json:3:26: syscalls[0].action: unknown action "SCMP_ACT_DENY"`,
		"baddefault.json": `"SCMP_ACT_PERMIT"`,
		"badarch.json":    `"SCMP_ARCH_Z80"`,
		"unknownkey.json": `"sycalls"`,
		"missing.json":    "missing.json",
	} {
		marker := filepath.Join(dir, "ran-"+file)
		r := aj(t, "run", "--seccomp", filepath.Join(dir, file), "--", "sh", "-c", "touch "+marker)
		wantCode(t, r, 125)
		if !strings.Contains(r.stderr, filepath.Join(dir, file)) && file != "missing.json" || !strings.Contains(r.stderr, says) {
			t.Errorf("%s: stderr does not name the file and %s:\n%s", file, says, r.stderr)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 3 || !strings.HasPrefix(r.stderr, "agentjail: ") {
			t.Errorf("%s: not one clear message:\n%s", file, r.stderr)
		}
		if fileExists(marker) {
			t.Errorf("%s: the command ran", file)
		}
	}
	// render refuses the same way: it compiles the same filters.
	r := aj(t, "render", "--seccomp", filepath.Join(dir, "badsyscall.json"), "--", "true")
	wantCode(t, r, 125)
	if bytes.Contains([]byte(r.stdout), []byte("bwrap")) {
		t.Errorf("render printed a command line for a bad filter:\n%s", r.stdout)
	}
}

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The agent's own sandbox inside agentjail's: the matrix of docs/nesting.md
// (What was measured), made executable. Subtests read as the table does:
// the row (the outer layer), then each inner command and the result it
// must have.

// innerColumn is one thing the agent's own sandbox does.
type innerColumn struct{ name, cmd string }

// The table's two columns, and loopback in a network-namespaced inner
// sandbox.
var innerColumns = []innerColumn{
	{"inner unshare -Ur true", "unshare -Ur true"},
	{"inner bwrap --unshare-user --unshare-pid --unshare-net --proc", "bwrap --ro-bind / / --unshare-user --unshare-pid --unshare-net --proc /proc --dev /dev true"},
	{"inner unshare -Urn ip link set lo up", "unshare -Urn ip link set lo up"},
}

// innerScript runs every column and reports each as "@@N EXIT" followed
// by its output (through a file, so that a stuck grandchild cannot hold
// the jail's stdout).
func innerScript(cols []innerColumn) string {
	var b strings.Builder
	b.WriteString("d=$(mktemp -d) || exit 99\n")
	for i, c := range cols {
		fmt.Fprintf(&b, "%s >\"$d/%d\" 2>&1 </dev/null; echo \"@@%d $?\"; cat \"$d/%d\"\n", c.cmd, i, i, i)
	}
	return b.String()
}

// innerResult is one column's exit code and output.
type innerResult struct {
	exit   int
	output string
}

func parseInner(t *testing.T, out string, n int) []innerResult {
	t.Helper()
	res := make([]innerResult, n)
	seen := 0
	cur := -1
	for _, line := range strings.Split(out, "\n") {
		var i, code int
		if _, err := fmt.Sscanf(line, "@@%d %d", &i, &code); err == nil && i >= 0 && i < n {
			res[i].exit, cur = code, i
			seen++
			continue
		}
		if cur >= 0 && line != "" {
			res[cur].output += line + "\n"
		}
	}
	if seen != n {
		t.Fatalf("%d of %d inner commands reported:\n%s", seen, n, out)
	}
	return res
}

// refused is how a forbidden namespace shows: ENOSPC from --disable-userns,
// EPERM from a seccomp filter (bwrap words EPERM as "No permissions to
// creating new namespace").
func refused(output string) bool {
	for _, s := range []string{"No space left on device", "ENOSPC", "Operation not permitted", "No permissions to creat"} {
		if strings.Contains(output, s) {
			return true
		}
	}
	return false
}

// TestNestingMatrix: in every built-in tier, whether agentjail runs as root
// or as uid 1000, the agent can build its own sandbox — a user namespace, a
// bwrap with a fresh /proc and its own network, loopback up in a new
// network namespace; in sealed it can do none of these.
func TestNestingMatrix(t *testing.T) {
	jailed(t)
	profiles := visibleDir(t)
	write(t, profiles, map[string]string{"tier1-net.yaml": "extends: tier1\nnetwork:\n  mode: none\n"})
	rows := []struct {
		name, profile string
		sealed        bool
	}{
		{"tier1", "tier1", false},
		{"tier2", "tier2", false},
		{"tier3", "tier3", false},
		{"tier1 without a network (network.mode none)", filepath.Join(profiles, "tier1-net.yaml"), false},
		{"sealed", "sealed", true},
	}
	callers := []struct {
		name string
		inv  invocation
	}{
		{"root", invocation{}},
		{"uid 1000", invocation{env: []string{"HOME=/"}, cred: &syscall.Credential{Uid: runUID, Gid: runUID}}},
	}
	script := innerScript(innerColumns)
	for _, row := range rows {
		for _, caller := range callers {
			t.Run(row.name+", agentjail run as "+caller.name, func(t *testing.T) {
				t.Parallel()
				r := caller.inv.run(t, "run", "--profile", row.profile, "--", "sh", "-c", script)
				wantCode(t, r, 0)
				got := parseInner(t, r.stdout, len(innerColumns))
				for i, col := range innerColumns {
					want := map[bool]string{false: "ok", true: "FAIL"}[row.sealed]
					t.Run(col.name+"="+want, func(t *testing.T) {
						switch {
						case !row.sealed && got[i].exit != 0:
							t.Errorf("exit %d:\n%s", got[i].exit, got[i].output)
						case row.sealed && (got[i].exit == 0 || !refused(got[i].output)):
							t.Errorf("want a refused namespace, got exit %d:\n%s", got[i].exit, got[i].output)
						}
					})
				}
			})
		}
	}
}

// TestNestingOuterLayerRows keeps docs/nesting.md's outer-layer rows (What
// was measured), each one plain bwrap command line, so that a bubblewrap
// or kernel change that alters them is caught here.
func TestNestingOuterLayerRows(t *testing.T) {
	jailed(t)
	common := []string{"--ro-bind", "/", "/", "--tmpfs", "/tmp", "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--dev", "/dev", "--die-with-parent", "--new-session"}
	cantMountProc := "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
	rows := []struct {
		name  string
		asRun bool // bwrap started as uid 1000 (privileges dropped before exec)
		flags []string
		want  [2]string // per table column: "" for ok, else the failure's message
	}{
		{"root, no userns, fresh proc", false, []string{"--proc", "/proc"}, [2]string{"", cantMountProc}},
		{"root, no userns, host proc bound", false, []string{"--bind", "/proc", "/proc"}, [2]string{"", ""}},
		{"root, --unshare-user, fresh proc", false, []string{"--unshare-user", "--proc", "/proc"}, [2]string{"", cantMountProc}},
		{"root, --unshare-user --uid 1000, fresh proc", false, []string{"--unshare-user", "--uid", "1000", "--proc", "/proc"}, [2]string{"", cantMountProc}},
		{"root, --cap-drop ALL, fresh proc", false, []string{"--cap-drop", "ALL", "--proc", "/proc"},
			[2]string{"unshare: write failed /proc/self/uid_map: Operation not permitted", "bwrap: setting up uid map: Operation not permitted"}},
		{"uid 1000, fresh proc", true, []string{"--proc", "/proc"}, [2]string{"", ""}},
		{"uid 1000, fresh proc, --unshare-net", true, []string{"--proc", "/proc", "--unshare-net"}, [2]string{"", ""}},
		{"uid 1000, --unshare-user --disable-userns", true, []string{"--unshare-user", "--disable-userns", "--proc", "/proc"},
			[2]string{"unshare: unshare failed: No space left on device", "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)"}},
	}
	bwrapPath, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		for i, col := range innerColumns[:2] {
			want := "ok"
			if row.want[i] != "" {
				want = "FAIL"
			}
			t.Run(row.name+"/"+col.name+"="+want, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				args := append(append(append([]string{}, common...), row.flags...), "--", "sh", "-c", col.cmd)
				cmd := exec.CommandContext(ctx, bwrapPath, args...)
				cmd.Dir = "/"
				if row.asRun {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: runUID, Gid: runUID}}
				}
				out, err := cmd.CombinedOutput()
				if ctx.Err() != nil {
					t.Fatalf("bwrap %q did not finish in a minute", args)
				}
				switch {
				case row.want[i] == "" && err != nil:
					t.Errorf("bwrap %s: %v\n%s", strings.Join(args, " "), err, out)
				case row.want[i] != "" && (err == nil || !strings.Contains(string(out), row.want[i])):
					t.Errorf("bwrap %s: want failure %q, got %v:\n%s", strings.Join(args, " "), row.want[i], err, out)
				}
			})
		}
	}
}

// maskedProc runs agentjail as a container runtime with Docker's default
// /proc would: in its own pid namespace whose /proc has a masked path.
var maskedProc = []string{"unshare", "-mpf", "--mount-proc", "sh", "-c", `mount --bind /dev/null /proc/timer_list && exec "$@"`, "sh"}

// TestMaskedProcFailsClosed: where a fresh /proc cannot be mounted, a run
// refuses before starting anything and says to run agentjail doctor.
func TestMaskedProcFailsClosed(t *testing.T) {
	jailed(t)
	dir := workspace(t)
	marker := filepath.Join(dir, "ran")
	r := invocation{wrap: maskedProc}.run(t, "run", "--write", dir, "--", "touch", marker)
	wantCode(t, r, 125)
	for _, want := range []string{"cannot mount a fresh /proc in the jail", "/proc/timer_list", "run `agentjail doctor`", "proc: fresh-or-bind"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if fileExists(marker) {
		t.Error("the command ran")
	}
	if strings.Contains(r.stderr, "Can't mount proc") {
		t.Errorf("bwrap was started anyway:\n%s", r.stderr)
	}
}

// TestMaskedProcDegradesWhenAllowed: a profile that allows it binds the
// existing /proc, says so on stderr and in render --json, keeps the masks,
// and the agent's own sandbox works in its weaker mode (Claude Code's
// enableWeakerNestedSandbox binds /proc) but not with a fresh /proc.
func TestMaskedProcDegradesWhenAllowed(t *testing.T) {
	jailed(t)
	profile := weakProfile(t)
	cols := []innerColumn{
		{"inner unshare -Ur true", "unshare -Ur true"},
		{"inner bwrap with fresh proc", innerColumns[1].cmd},
		{"inner bwrap binding proc", "bwrap --ro-bind / / --unshare-user --unshare-pid --bind /proc /proc --dev /dev true"},
		{"inner unshare -Urn ip link set lo up", "unshare -Urn ip link set lo up"},
		{"masked path stays masked", "test ! -s /proc/timer_list"},
	}
	r := invocation{wrap: maskedProc}.run(t, "run", "--profile", profile, "--", "sh", "-c", innerScript(cols))
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "agentjail: degraded: jail: no fresh /proc and no pid namespace (filesystem.proc: fresh-or-bind; mounts cover /proc/timer_list)") {
		t.Errorf("stderr does not name the degradation:\n%s", r.stderr)
	}
	got := parseInner(t, r.stdout, len(cols))
	for i, want := range []bool{true, false, true, true, true} {
		if ok := got[i].exit == 0; ok != want {
			t.Errorf("%s: exit %d, want success %v:\n%s", cols[i].name, got[i].exit, want, got[i].output)
		}
	}
	if !strings.Contains(got[1].output, "Can't mount proc") {
		t.Errorf("inner fresh /proc failed otherwise:\n%s", got[1].output)
	}

	r = invocation{wrap: maskedProc}.run(t, "render", "--json", "--profile", profile, "--", "true")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"degradations": [`+"\n"+`    "no fresh /proc`) || !strings.Contains(r.stdout, `"--bind",`+"\n"+`    "/proc",`) {
		t.Errorf("render --json lacks the degradation or the bound /proc:\n%s", r.stdout)
	}
	// Without the mask, the same profile gets a fresh /proc and no
	// degradation: the fallback is taken only on evidence.
	r = aj(t, "run", "--profile", profile, "--", "true")
	wantCode(t, r, 0)
	if strings.Contains(r.stderr, "degraded: jail:") {
		t.Errorf("degraded on an unmasked host:\n%s", r.stderr)
	}
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Fatal(err)
	}
}

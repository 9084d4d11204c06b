package integration

// The escapes suite (issue 9): one test per escape class that plain
// bubblewrap leaves open, in the order of the issue. Each test first runs
// the attack under plain bwrap, as people run it by hand, and requires the
// hole to show on the host (a changed hash, a file that exists, a mode):
// that proves the test can see the escape at all. Then it runs the same
// attack under agentjail and requires the host to be untouched. Where this
// kernel cannot show a hole (x32 is not built in, /proc/sysrq-trigger is
// absent, TIOCLINUX needs a virtual console), the test reads the filter's
// answer or the jail's mount table instead, and says so.
//
//	go test ./test/integration -run '^TestEscape'   (make escapes)
//
//	Capabilities                      TestEscapeCapabilities
//	/proc/sys and friends             TestEscapeProcSys
//	every writable tmpfs capped       TestEscapeTmpfsCaps
//	missing protected paths           TestEscapeMissingProtectedPaths
//	rename-parent bypass              TestEscapeRenameParent
//	git metadata (issue 14, item 3)   TestEscapeGitMetadata, TestEscapeGitNewSubmodule,
//	                                    TestEscapeGitGlobalConfigInAWritableHome (escapes_git_test.go)
//	symlinked writable roots          TestEscapeSymlinkedWritableRoots
//	setuid / device files             TestEscapeSetIDAndDeviceFiles
//	concurrent runs                   TestEscapeConcurrentRuns
//	inherited file descriptors        TestEscapeInheritedFDs
//	alternate ABIs and new syscalls   TestEscapeAlternateABIs
//	TTY injection                     TestEscapeTTYInjection
//	terminal modes, TIOCSETD, \e[8m    TestEscapeTerminal (escapes_terminal_test.go)
//	writing the terminal on stdin     TestEscapeTerminalStdin (escapes_terminal_test.go)
//	exit-code ambiguity               TestEscapeExitCodeAmbiguity
//	inner user namespace              TestEscapeInnerUserNamespace
//	fail closed                       TestEscapeFailClosed
//	another user's run directory      TestEscapeRunDirectory
//	socket files in /run/user         TestEscapeUserRuntimeSockets
//	the run directory from a jail     TestEscapeRunDirectoryInTheJail
//	the operator's Claude Code login  TestEscapeClaudeLogin, TestEscapeClaudeConfig (issue 14; no
//	  and ~/.claude.json                baseline: the door was agentjail's)
//	the operator's outputs            TestEscapeOperatorOutputsRecord, ...Log, ...Results,
//	  in a writable root                ...OtherRoots (escapes_outputs_test.go)
//	a home as a writable root         TestEscapeCopiesFromAWritableHome, TestEscapeLoginInAWritableHome
//	the resident launcher's socket    TestEscapeLauncherSocket (launcher_test.go)
//	                                    (escapes_home_test.go)
//	input files in a writable root    TestEscapeInputFilesInAWritableRoot (escapes_fs_test.go)
//	processes and memory exhausted    TestEscapeExhaustion (escapes_exhaustion_test.go)
//	the compiled-filter cache         TestEscapeSeccompCache (escapes_cache_test.go)
//	egress: host loopback, the host's TestEscapeNetworkEgress (escapes_network_test.go;
//	  address, cloud metadata          TestNetworkProxy, TestNetworkHostSockets and
//	                                    TestNetworkFloodAndKill in network_test.go)
//	symlinked protected paths         TestSymlinkedProtectedPaths (jail_test.go)

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// plainBwrap is the baseline: bubblewrap with the host read-only, a fresh
// /proc and /dev, new pid namespace and session, and the test's binds; as
// root unless cred says otherwise.
type plainBwrap struct {
	cred  *syscall.Credential
	args  []string   // binds and flags before the command
	files []*os.File // inherited from fd 3 on
	stdin *os.File
	// timeout is the hang detector, a minute when 0.
	timeout time.Duration
}

func (pb plainBwrap) run(t *testing.T, argv ...string) result {
	t.Helper()
	args := append([]string{"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--unshare-pid", "--die-with-parent", "--new-session"}, pb.args...)
	args = append(append(args, "--"), argv...)
	timeout := cmp.Or(pb.timeout, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bwrap", args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.ExtraFiles = pb.files
	if pb.stdin != nil {
		cmd.Stdin = pb.stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if pb.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pb.cred}
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("plain bwrap %q did not finish in %v", argv, timeout)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("plain bwrap: %v", err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// holeShown fails the test when plain bwrap did not show the hole: a test
// that cannot see the escape there proves nothing under agentjail.
func holeShown(t *testing.T, shown bool, what string, r result) {
	t.Helper()
	if !shown {
		t.Fatalf("plain bwrap did not show the hole (%s), so this test cannot see it either:\nstdout:\n%s\nstderr:\n%s", what, r.stdout, r.stderr)
	}
}

var uid1000 = &syscall.Credential{Uid: runUID, Gid: runUID}

// TestEscapeCapabilities: bwrap run as root keeps every capability, and the
// agent can unmount a re-protected .env and write the host's file. Under
// agentjail the agent ends with CapEff 0 and NoNewPrivs 1 whatever user
// agentjail was started as, and the .env is unchanged.
func TestEscapeCapabilities(t *testing.T) {
	jailed(t)
	attack := func(p string) string {
		env := filepath.Join(p, ".env")
		return fmt.Sprintf(`grep -E '^(CapEff|NoNewPrivs)' /proc/self/status
umount %[1]s 2>/dev/null; umount -l %[1]s 2>/dev/null; mount -o remount,bind,rw %[1]s 2>/dev/null
echo pwned > %[1]s 2>/dev/null && echo WROTE
true`, env)
	}

	p := workspace(t)
	write(t, p, map[string]string{".env": "SECRET=1\n"})
	env := filepath.Join(p, ".env")
	before := treeHash(t, p)
	c := plainBwrap{args: []string{"--bind", p, p, "--ro-bind", env, env}}.run(t, "sh", "-c", attack(p))
	holeShown(t, strings.Contains(c.stdout, "WROTE") && treeHash(t, p) != before && !strings.Contains(c.stdout, "CapEff:\t0000000000000000"),
		"root keeps its capabilities and unmounts the read-only .env", c)
	write(t, p, map[string]string{".env": "SECRET=1\n"})

	other := workspace(t) // owned by uid 4242 for --user 4242
	write(t, other, map[string]string{".env": "SECRET=2\n"})
	chownR(t, other, 4242)
	rootOwned := workspace(t) // a capless root writes only what root owns
	write(t, rootOwned, map[string]string{".env": "SECRET=3\n"})
	chownR(t, rootOwned, 0)
	for _, c := range []struct {
		name string
		inv  invocation
		root string
		args []string
	}{
		{"root, run user from the directory owner", invocation{}, p, []string{"--chdir", p}},
		{"started as uid 1000", invocation{dir: p, env: []string{"HOME=/"}, cred: uid1000}, p, nil},
		{"root with --user 4242", invocation{}, other, []string{"--user", "4242", "--chdir", other}},
		{"root, sealed, --user root", invocation{}, rootOwned, []string{"--profile", "sealed", "--user", "root", "--chdir", rootOwned}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := treeHash(t, c.root)
			r := c.inv.run(t, append(append([]string{"run", "--write", c.root}, c.args...), "--", "sh", "-c", attack(c.root))...)
			wantCode(t, r, 0)
			for _, want := range []string{"CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the agent's status lacks %q:\n%s", want, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "WROTE") || treeHash(t, c.root) != before {
				t.Errorf("the agent wrote the re-protected .env on the host:\n%s", r.stdout)
			}
		})
	}
}

// TestEscapeProcSys: bwrap never covers /proc/sys, and a jailed uid 0, even
// without capabilities, writes host sysctls. Under every profile the write
// fails and the host's value stays; sealed profiles that run uid 0 cover
// /proc/sys, /proc/irq and /proc/bus read-only themselves (the mount table
// shows it). /proc/sysrq-trigger does not exist on this kernel, so only the
// renderer's --ro-bind-try of it can be checked
// (mounts.TestRenderRefusesRootAgentOutsideSealed); the test says so when
// it is absent.
func TestEscapeProcSys(t *testing.T) {
	jailed(t)
	// A harmless sysctl: how many kernel messages pass the rate limit in a
	// burst. Changed by the plain bwrap run, restored at the end.
	const sysctl = "/proc/sys/kernel/printk_ratelimit_burst"
	read := func() int {
		data, err := os.ReadFile(sysctl)
		n, cerr := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || cerr != nil {
			t.Fatalf("read %s: %v %v", sysctl, err, cerr)
		}
		return n
	}
	orig := read()
	t.Cleanup(func() { os.WriteFile(sysctl, []byte(strconv.Itoa(orig)), 0) })
	script := fmt.Sprintf(`echo %d > %s 2>/dev/null && echo WROTE %s
for f in /proc/sysrq-trigger /proc/irq/default_smp_affinity; do
	if [ -e $f ]; then cat $f 2>/dev/null > $f 2>/dev/null && echo WROTE $f; else echo ABSENT $f; fi
done
grep -E ' /proc/(sys|irq|bus|sysrq-trigger) ' /proc/self/mountinfo | cut -d' ' -f5,6
true`, orig+1, sysctl, sysctl)

	c := plainBwrap{args: []string{"--cap-drop", "ALL"}}.run(t, "sh", "-c", script)
	holeShown(t, strings.Contains(c.stdout, "WROTE "+sysctl) && read() == orig+1, "a capless root writes "+sysctl, c)
	os.WriteFile(sysctl, []byte(strconv.Itoa(orig)), 0)

	for _, args := range [][]string{
		{"--profile", "tier1"}, {"--profile", "tier2"}, {"--profile", "tier3"},
		{"--profile", "sealed"}, {"--profile", "sealed", "--user", "root"},
	} {
		r := aj(t, append(append([]string{"run"}, args...), "--", "sh", "-c", script)...)
		wantCode(t, r, 0)
		if strings.Contains(r.stdout, "WROTE") || read() != orig {
			t.Errorf("%v: a /proc write reached the host:\n%s", args, r.stdout)
		}
		if !slicesContains(args, "root") {
			continue
		}
		// uid 0 in the sealed jail: the covers must be in the mount table.
		for _, p := range []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/sysrq-trigger"} {
			if !fileExists(p) {
				t.Logf("%s does not exist on this kernel: nothing to cover", p)
				continue
			}
			if !strings.Contains(r.stdout, p+" ro,") {
				t.Errorf("sealed root: %s is not a read-only mount in the jail:\n%s", p, r.stdout)
			}
		}
	}
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestEscapeTmpfsCaps: bwrap's --dev makes a writable /dev and /dev/shm
// with no size limit (half the RAM). In the jail every writable tmpfs has
// the size its profile sets and /dev is read-only. Filling tmpfs memory
// leaves no file on the host to hash, so the test reads the jail's mount
// table (statfs of each mount point) and fills /dev/shm past its cap.
func TestEscapeTmpfsCaps(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	const tmpfsMagic = 0x1021994
	// writable returns the writable tmpfs mount points and their sizes.
	writable := func(r result) map[string]uint64 {
		out := map[string]uint64{}
		for _, line := range strings.Split(r.stdout, "\n") {
			var path, mode string
			var magic, size uint64
			if _, err := fmt.Sscanf(line, "mount=%s %v %s %d", &path, &magic, &mode, &size); err == nil && magic == tmpfsMagic && mode == "rw" {
				out[path] = size
			}
		}
		return out
	}
	fill := "dd if=/dev/zero of=/dev/shm/fill bs=1M count=65 2>/dev/null && echo FILLED; rm -f /dev/shm/fill"

	c := plainBwrap{args: []string{"--tmpfs", "/tmp"}}.run(t, "sh", "-c", e.probe+" mounts; "+fill)
	w := writable(c)
	holeShown(t, w["/dev/shm"] > 64<<20 && w["/dev"] > 0 && strings.Contains(c.stdout, "FILLED"), "an uncapped, writable /dev and /dev/shm", c)

	caps := map[string]uint64{"/dev/shm": 64 << 20, "/tmp": 1 << 30, "/var/tmp": 256 << 20}
	for _, profile := range []string{"tier1", "sealed"} {
		r := aj(t, "run", "--profile", profile, "--", "sh", "-c", e.probe+" mounts; "+fill)
		wantCode(t, r, 0)
		got := writable(r)
		if len(got) == 0 {
			t.Fatalf("%s: no writable tmpfs found:\n%s", profile, r.stdout)
		}
		for path, size := range got {
			limit, ok := caps[path]
			if strings.HasPrefix(path, "/tmp/home/") {
				limit, ok = 512<<20, true // the private home
			}
			if !ok || size > limit {
				t.Errorf("%s: writable tmpfs %s of %d bytes (cap %d, known %v)", profile, path, size, limit, ok)
			}
		}
		if strings.Contains(r.stdout, "FILLED") {
			t.Errorf("%s: 65 MiB fit into /dev/shm", profile)
		}
		if !strings.Contains(r.stdout, "mount=/dev 0x1021994 ro ") {
			t.Errorf("%s: /dev is not read-only:\n%s", profile, r.stdout)
		}
	}
}

// TestEscapeInheritedFDs: bwrap passes every descriptor it inherits into
// the sandbox, and a host file opened by agentjail's caller can be written
// from inside. In the jail only 0, 1 and 2 are open, in the agent and
// in the sandbox's init.
func TestEscapeInheritedFDs(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	host := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(host, []byte("host data\n"), 0o600)
	var files []*os.File
	for range 7 { // fds 3..9
		f, err := os.OpenFile(host, os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	script := e.probe + ` fds
for n in 3 4 5 6 7 8 9; do
	(echo pwned >&$n) 2>/dev/null && echo OPEN $n
	(echo pwned >> /proc/1/fd/$n) 2>/dev/null && echo VIA-INIT $n
done
true`
	before := treeHash(t, filepath.Dir(host))

	c := plainBwrap{files: files}.run(t, "sh", "-c", script)
	holeShown(t, strings.Contains(c.stdout, "OPEN 3") && treeHash(t, filepath.Dir(host)) != before, "inherited fds reach the sandbox", c)
	os.WriteFile(host, []byte("host data\n"), 0o600)

	cmd := exec.Command(agentjail, "run", "--", "sh", "-c", script)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = "/", []string{"PATH=/usr/bin:/bin"}, files
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentjail: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "fds=0,1,2\n") || strings.Contains(out.String(), "OPEN") || strings.Contains(out.String(), "VIA-INIT") {
		t.Errorf("descriptors reached the jail:\n%s", out.String())
	}
	if treeHash(t, filepath.Dir(host)) != before {
		t.Error("the host file was written through an inherited descriptor")
	}
}

// TestEscapeAlternateABIs: system calls through another ABI and the calls
// seccomp cannot see into.
func TestEscapeAlternateABIs(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)

	// i386 `int 0x80` calls are live on x86_64 kernels with IA32
	// emulation: without a filter the probe gets its pid through them; the
	// filter kills it (SIGSYS). A kernel built or booted without it
	// (CONFIG_IA32_EMULATION_DEFAULT_DISABLED, ia32_emulation=0) answers
	// int 0x80 with a general protection fault (SIGSEGV) before any
	// system call, and so before seccomp: no hole can show, the jail must
	// fault alike, and seccomp.TestOtherArchitecturesAreKilled checks the
	// filter's answer in the BPF VM.
	t.Run("i386", func(t *testing.T) {
		t.Parallel()
		if runtime.GOARCH != "amd64" {
			t.Skip("int 0x80 is amd64's i386 entry; seccomp.TestOtherArchitecturesAreKilled covers the filter")
		}
		c := plainBwrap{}.run(t, e.probe, "int80")
		pid := probeResults(t, c)["int80"]
		noEmulation := pid == "SIGSEGV"
		if noEmulation {
			t.Logf("this kernel has no IA32 emulation (int 0x80 faults without a filter): the jail must fault alike")
		} else {
			holeShown(t, c.code == 0 && pid != "" && !strings.HasPrefix(pid, "-"), "int 0x80 getpid works (IA32 emulation)", c)
		}
		for _, profile := range []string{"tier1", "sealed"} {
			r := aj(t, "run", "--profile", profile, "--", e.probe, "int80")
			if noEmulation {
				if got := probeResults(t, r)["int80"]; got != "SIGSEGV" {
					t.Errorf("%s: int 0x80 gave %q, want the fault it gives without a filter", profile, got)
				}
				continue
			}
			wantCode(t, r, 128+31)
			if strings.Contains(r.stdout, "int80=") {
				t.Errorf("%s: int 0x80 returned: %q", profile, r.stdout)
			}
		}
	})

	// x32 is not built into this kernel (the call is ENOSYS without a
	// filter), so no hole can show: the test checks that the filter
	// answers x32 numbers by killing, as seccomp.TestOtherArchitecturesAreKilled
	// checks in the BPF VM.
	t.Run("x32", func(t *testing.T) {
		t.Parallel()
		if runtime.GOARCH != "amd64" {
			t.Skip("x32 is an amd64 ABI")
		}
		c := plainBwrap{}.run(t, e.probe, "x32")
		if got := probeResults(t, c)["x32"]; got != "ENOSYS" && got != "ok" {
			t.Fatalf("x32 getpid without a filter: %q", got)
		}
		r := aj(t, "run", "--", e.probe, "x32")
		wantCode(t, r, 128+31)
	})

	// io_uring operations bypass seccomp; the filter refuses the rings.
	t.Run("io_uring", func(t *testing.T) {
		t.Parallel()
		c := plainBwrap{}.run(t, e.probe, "io_uring")
		holeShown(t, probeResults(t, c)["io_uring"] == "ok", "io_uring_setup works", c)
		for _, profile := range []string{"tier1", "sealed"} {
			if got := probeResults(t, aj(t, "run", "--profile", profile, "--", e.probe, "io_uring"))["io_uring"]; got != "EPERM" {
				t.Errorf("%s: io_uring_setup: %q, want EPERM", profile, got)
			}
		}
	})

	// The new mount API in sealed profiles. Inside its own user namespace
	// an agent may use it (plain bwrap, and the free tiers, which keep it
	// for the agent's own sandbox); in sealed, no user namespace can be
	// made and the filter refuses every call (seccomp.TestBuiltinSealed
	// checks the same in the BPF VM).
	t.Run("new mount API, sealed", func(t *testing.T) {
		t.Parallel()
		calls := []string{"fsopen", "open_tree", "fspick", "fsmount", "move_mount", "mount_setattr"}
		inner := append([]string{"unshare", "-Urm", e.probe}, calls...)
		c := plainBwrap{cred: uid1000}.run(t, inner...)
		got := probeResults(t, c)
		holeShown(t, got["fsopen"] == "ok" && got["open_tree"] == "ok", "fsopen and open_tree work in an inner user namespace", c)
		if got := probeResults(t, aj(t, append([]string{"run", "--profile", "tier1", "--"}, inner...)...)); got["fsopen"] != "ok" {
			t.Errorf("tier1 keeps the mount API for the agent's own sandbox: %v", got)
		}
		r := aj(t, append([]string{"run", "--profile", "sealed", "--", e.probe}, calls...)...)
		wantCode(t, r, 0)
		for call, res := range probeResults(t, r) {
			if res != "EPERM" {
				t.Errorf("sealed: %s: %q, want EPERM", call, res)
			}
		}
		if r := aj(t, append([]string{"run", "--profile", "sealed", "--"}, inner...)...); r.code == 0 {
			t.Error("sealed: unshare -Urm succeeded")
		}
	})
}

// TestEscapeTTYInjection: an agent on the operator's terminal can type
// into it with TIOCSTI: bwrap's --new-session stops an unprivileged one,
// but not a privileged one. The test gives agentjail a pty as its
// controlling terminal, as a shell would, and reads the terminal's input
// queue afterwards: nothing may have been typed. TIOCLINUX needs a virtual
// console, which a pty is not: for it the test reads the filter's answer
// (EPERM, where the kernel would say ENOTTY).
func TestEscapeTTYInjection(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	calls := []string{"inject", "inject-high", "tioclinux-fd0"}

	c, typed := onPty(t, func(tty *os.File) *exec.Cmd {
		return exec.Command("bwrap", append([]string{"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
			"--unshare-pid", "--die-with-parent", "--new-session", "--", e.probe}, calls...)...)
	})
	holeShown(t, strings.Contains(typed, "echo INJECTED"), "root types into the terminal despite --new-session", c)
	if tl := probeResults(t, c)["tioclinux-fd0"]; tl == "EPERM" {
		t.Fatalf("TIOCLINUX on a pty without a filter: %q, want the kernel's own answer", tl)
	}

	for _, args := range [][]string{{"--profile", "tier1"}, {"--profile", "sealed", "--user", "root"}} {
		r, typed := onPty(t, func(tty *os.File) *exec.Cmd {
			return exec.Command(agentjail, append(append(append([]string{"run"}, args...), "--", e.probe), calls...)...)
		})
		if typed != "" {
			t.Errorf("%v: typed into the terminal: %q", args, typed)
		}
		for _, call := range calls {
			if got := probeResults(t, r)[call]; got != "EPERM" {
				t.Errorf("%v: %s: %q, want EPERM\n%s", args, call, got, r.stderr)
			}
		}
	}
}

// onPty runs the command made by mk with a new pty as its stdin and
// controlling terminal, and returns its result and what is waiting in the
// terminal's input queue once it has ended.
func onPty(t *testing.T, mk func(tty *os.File) *exec.Cmd) (result, string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	// Raw: injected bytes are readable at once, with no echo to drain.
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON | unix.ECHO
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 0, 0
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	cmd := mk(tty)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "TERM=dumb"}
	cmd.Stdin = tty
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	k, _ := tty.Read(buf) // VMIN 0, VTIME 0: returns at once
	return result{out.String(), errOut.String(), code}, string(buf[:max(k, 0)])
}

// TestEscapeExitCodeAmbiguity: bwrap exits 1 when the command cannot be
// executed, as when the command itself exits 1, and its --json-status-fd
// cannot tell either from a failed setup. agentjail reports 127 and 126
// with the path and errno (TestExitCodesPassThrough has the full table).
func TestEscapeExitCodeAmbiguity(t *testing.T) {
	jailed(t)
	p := workspace(t)
	write(t, p, map[string]string{"notexec.sh": "#!/bin/sh\nexit 0\n"})
	missing, notExec := filepath.Join(p, "missing"), filepath.Join(p, "notexec.sh")
	a := plainBwrap{args: []string{"--bind", p, p}}.run(t, missing)
	b := plainBwrap{}.run(t, "sh", "-c", "exit 1")
	holeShown(t, a.code == 1 && b.code == 1, "a missing command and `exit 1` both exit 1", a)

	for _, c := range []struct {
		argv   []string
		code   int
		reason string
		errno  int
	}{
		{[]string{missing}, 127, "exec_failed", int(syscall.ENOENT)},
		{[]string{notExec}, 126, "exec_failed", int(syscall.EACCES)},
		{[]string{"sh", "-c", "exit 1"}, 1, "exit", 0},
	} {
		rec := filepath.Join(t.TempDir(), "record.json")
		r := aj(t, append([]string{"run", "--write", p, "--chdir", p, "--record", rec, "--"}, c.argv...)...)
		wantCode(t, r, c.code)
		got := readRecord(t, rec, c.code)
		if got.Reason != c.reason {
			t.Errorf("%q: reason %s, want %s", c.argv, got.Reason, c.reason)
		}
		if c.errno != 0 && (got.ExecFailure == nil || got.ExecFailure.Path != c.argv[0] || got.ExecFailure.Errno != c.errno) {
			t.Errorf("%q: exec_failure %+v, want path %s errno %d", c.argv, got.ExecFailure, c.argv[0], c.errno)
		}
	}
}

// TestEscapeInnerUserNamespace: from inside the jail, a mount namespace of
// the agent's own (with a user namespace, as the free tiers allow) must not
// undo the outer policy: unmounting, remounting read-write or binding the
// writable root without its submounts (a non-recursive bind drops the
// read-only .env) must leave the host's .env unchanged. The kernel locks
// mounts inherited into a less privileged namespace (mount_namespaces(7),
// "MNT_LOCKED"). Plain bwrap that gives the agent uid 0 and capabilities in
// its user namespace (--unshare-user --uid 0) shows the hole: those mounts
// are not locked for it.
func TestEscapeInnerUserNamespace(t *testing.T) {
	jailed(t)
	p := workspace(t)
	write(t, p, map[string]string{".env": "SECRET=1\n"})
	env := filepath.Join(p, ".env")
	script := fmt.Sprintf(`for ns in -m -Urm; do
unshare $ns sh -c '
	umount %[2]s 2>/dev/null || umount -l %[2]s 2>/dev/null
	mount -o remount,bind,rw %[2]s 2>/dev/null
	echo pwned >> %[2]s 2>/dev/null && echo WROTE
	mkdir -p /tmp/nonrec && mount --bind %[1]s /tmp/nonrec 2>/dev/null && echo pwned >> /tmp/nonrec/.env 2>/dev/null && echo WROTE-NONRECURSIVE
	true' 2>/dev/null | sed "s/^/$ns /"
done
true`, p, env)
	before := treeHash(t, p)
	// uid 0 of bwrap's user namespace maps to root only: it may write only
	// what root owns.
	chownR(t, p, 0)
	c := plainBwrap{args: []string{"--unshare-user", "--uid", "0", "--gid", "0", "--tmpfs", "/tmp", "--bind", p, p, "--ro-bind", env, env}}.run(t, "sh", "-c", script)
	holeShown(t, strings.Contains(c.stdout, "WROTE") && treeHash(t, p) != before, "the agent's own mount namespace undoes the read-only .env", c)
	write(t, p, map[string]string{".env": "SECRET=1\n"})

	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", script)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") || treeHash(t, p) != before {
		t.Errorf("an inner namespace wrote the re-protected .env on the host:\n%s", r.stdout)
	}
	// The inner namespace itself works (or the test proves nothing).
	if r := aj(t, "run", "--", "unshare", "-Urm", "true"); r.code != 0 {
		t.Fatalf("unshare -Urm fails in tier1: %s", r.stderr)
	}
}

// TestEscapeFailClosed: without bwrap, with an unusable bwrap, or when a
// step of setting up the policy fails, the command never runs (its marker
// file is never made) and agentjail exits 125 with one message. Bad
// profiles, seccomp files and a too-old bwrap are TestBadInput's and
// TestSeccompBadInput's.
func TestEscapeFailClosed(t *testing.T) {
	jailed(t)
	dir := visibleDir(t)
	ws := workspace(t)
	write(t, dir, map[string]string{
		"fails":    "#!/bin/sh\nexit 1\n",
		"bogus":    "#!/bin/sh\necho bubblewrap banana\n",
		"no-setup": "#!/bin/sh\nif [ \"$1\" = --version ]; then echo bubblewrap 0.8.0; exit 0; fi\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n",
		"runtime":  "not a directory\n",
	})
	for _, f := range []string{"fails", "bogus", "no-setup"} {
		os.Chmod(filepath.Join(dir, f), 0o755)
	}
	for _, c := range []struct {
		name string
		inv  invocation
		args []string
		want string
	}{
		{"no bwrap", invocation{env: []string{"AGENTJAIL_BWRAP=/nonexistent/bwrap"}}, nil, "bubblewrap (bwrap) not found"},
		{"bwrap --version fails", invocation{env: []string{"AGENTJAIL_BWRAP=" + filepath.Join(dir, "fails")}}, nil, "bubblewrap does not run"},
		{"bogus version", invocation{env: []string{"AGENTJAIL_BWRAP=" + filepath.Join(dir, "bogus")}}, nil, "bubblewrap does not run"},
		{"bwrap cannot set up the jail", invocation{env: []string{"AGENTJAIL_BWRAP=" + filepath.Join(dir, "no-setup")}}, nil, "bubblewrap could not set up the jail"},
		// The run directory (mask registry, control sockets, the runs'
		// homes) lives under $XDG_RUNTIME_DIR for a non-root caller; a
		// file there makes it unusable.
		{"run directory unusable", invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "XDG_RUNTIME_DIR=" + filepath.Join(dir, "runtime")}},
			[]string{"--write", ws}, "agentjail's run directory " + filepath.Join(dir, "runtime/agentjail") + ": "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(ws, "ran-"+strings.ReplaceAll(c.name, " ", "-"))
			r := c.inv.run(t, append(append([]string{"run"}, c.args...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if !strings.Contains(r.stderr, c.want) || !strings.HasPrefix(lines[len(lines)-1], "agentjail: ") {
				t.Errorf("stderr lacks %q:\n%s", c.want, r.stderr)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}

	// The real bwrap fails while it sets up the jail, after agentjail
	// made the run's agent homes (as root for run user 1000: the run's Claude
	// directory in /run/agentjail/RUN-ID): between two mounts, and after
	// every mount, the workspace's mask placeholders made on the host,
	// when it enters a start directory the run user may not (EACCES).
	// agentjail refuses a profile whose tmpfs bwrap could not mount
	// (TestBadInput), so a wrapper puts such a tmpfs (its mount point
	// under the read-only /: EROFS) among the real bwrap's mounts, before
	// the Claude directory's bind. The mode bits let the run user in, so
	// agentjail's own check passes; an ACL entry (which agentjail does not
	// read) shuts it out.
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{
		"mid-setup": "#!/bin/bash\nargs=()\nadded=\nfor a in \"$@\"; do\n" +
			"  if [ -z \"$added\" ] && [ \"$a\" = --bind ]; then args+=(--tmpfs /nonexistent-agentjail-test/cache); added=1; fi\n" +
			"  args+=(\"$a\")\ndone\nexec " + bwrap + " \"${args[@]}\"\n",
		"private/": "",
	})
	os.Chmod(filepath.Join(dir, "mid-setup"), 0o755)
	os.Chmod(filepath.Join(dir, "private"), 0o755)
	os.Chown(filepath.Join(dir, "private"), 0, 0)
	if out, err := exec.Command("setfacl", "-m", "u:"+strconv.Itoa(runUID)+":---", filepath.Join(dir, "private")).CombinedOutput(); err != nil {
		t.Fatalf("setfacl (Debian package acl, installed by make deps): %v %s", err, out)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"bwrap fails between mounts", []string{"AGENTJAIL_BWRAP=" + filepath.Join(dir, "mid-setup")}, nil,
			"bwrap: Can't mkdir parents for /nonexistent-agentjail-test/cache: Read-only file system"},
		{"bwrap fails after the mounts", nil, []string{"--chdir", filepath.Join(dir, "private")},
			"bwrap: Can't chdir to " + filepath.Join(dir, "private") + ": Permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := workspace(t) // no .env, .git, ...: their masks are made on the host
			before := treeHash(t, ws)
			marker := filepath.Join(ws, "ran")
			rec := recordPath(t)
			r := invocation{env: c.env}.run(t, append(append([]string{"run", "--user", strconv.Itoa(runUID), "--record", rec, "--write", ws}, c.args...), "--", "touch", marker)...)
			wantCode(t, r, 125)
			for _, want := range []string{c.want, "agentjail: bubblewrap could not set up the jail (exit 1); its message is above"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
			got := readRecord(t, rec, 125)
			if got.Reason != "setup_failed" || !strings.Contains(got.Error, "bubblewrap could not set up the jail") {
				t.Errorf("record: reason %q, error %q", got.Reason, got.Error)
			}
			if left := procsWithEnv("AGENTJAIL_RUN=" + got.RunID); len(left) > 0 {
				t.Errorf("processes of the failed run are left: %s", left)
			}
			homes := filepath.Join("/run/agentjail", got.RunID)
			if _, err := os.Lstat(homes); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the run's agent-homes directory %s is left (%v)", homes, err)
			}
			if treeHash(t, ws) != before {
				t.Errorf("mask placeholders are left in the workspace: %s", entries(t, ws))
			}
		})
	}
}

// TestEscapeRunDirectory: without $XDG_RUNTIME_DIR a non-root run keeps its
// state in $TMPDIR/agentjail-UID, which any local user can make first
// (mode 0777, or a symlink) to swap the masks' empty file, plant mask
// registry entries and control sockets, or read copied credentials. This
// hole is agentjail's own, not plain bubblewrap's: the test first shows the
// precondition (the run user can use the planted directory), then that
// agentjail refuses it — exit 125 naming the path, its owner and the fix —
// before the command runs and without touching it; and that a fresh one is
// made 0700.
func TestEscapeRunDirectory(t *testing.T) {
	jailed(t)
	const other = 1001 // the attacker
	ws := workspace(t)
	tmp := func(t *testing.T) string {
		d := workspace(t)
		os.Chmod(d, 0o1777)
		return d
	}
	plant := func(t *testing.T, dir string) {
		// An empty file that passes for the masks' one, which its owner
		// can fill while a run binds it over protected paths.
		write(t, dir, map[string]string{"empty": "", "masks/x": "/etc/passwd", "runs/": ""})
		chownR(t, dir, other)
		for _, sub := range []string{"masks", "runs"} {
			os.Chmod(filepath.Join(dir, sub), 0o777) // so runs can use them
		}
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, tmp string) string // the planted directory
		want  string
	}{
		{"another user's, mode 0777", func(t *testing.T, tmp string) string {
			d := filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID))
			plant(t, d)
			os.Chmod(d, 0o777)
			return d
		}, "is owned by uid 1001"},
		{"the run user's, writable by others", func(t *testing.T, tmp string) string {
			d := filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID))
			plant(t, d)
			os.Chown(d, runUID, runUID)
			os.Chmod(d, 0o777)
			return d
		}, "is writable by others (mode 0777)"},
		{"a symlink to another user's directory", func(t *testing.T, tmp string) string {
			d := filepath.Join(tmp, "elsewhere")
			plant(t, d)
			os.Chmod(d, 0o777)
			os.Symlink(d, filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID)))
			os.Lchown(filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID)), other, other)
			return d
		}, "is a symlink"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := tmp(t)
			planted := c.setup(t, tmp)
			probe := filepath.Join(planted, "probe")
			touch := exec.Command("touch", probe)
			touch.SysProcAttr = &syscall.SysProcAttr{Credential: uid1000}
			if out, err := touch.CombinedOutput(); err != nil || !fileExists(probe) {
				t.Fatalf("the run user cannot use the planted directory, so the test proves nothing: %v %s", err, out)
			}
			os.Remove(probe)
			before := treeHash(t, planted)
			marker := filepath.Join(ws, "ran-"+strings.ReplaceAll(c.name, " ", "-"))
			inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "TMPDIR=" + tmp}}
			r := inv.run(t, "run", "--write", ws, "--", "touch", marker)
			wantCode(t, r, 125)
			path := filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID))
			for _, want := range []string{"agentjail: agentjail's run directory is not yours alone: " + path, c.want, "XDG_RUNTIME_DIR"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
			if treeHash(t, planted) != before {
				t.Errorf("agentjail used the planted directory: it holds %s", entries(t, planted))
			}
		})
	}

	t.Run("a fresh one is made 0700", func(t *testing.T) {
		t.Parallel()
		tmp := tmp(t)
		inv := invocation{dir: ws, cred: uid1000, env: []string{"HOME=/", "TMPDIR=" + tmp}}
		wantCode(t, inv.run(t, "run", "--write", ws, "--", "true"), 0)
		fi, err := os.Lstat(filepath.Join(tmp, "agentjail-"+strconv.Itoa(runUID)))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || ownerOf(fi) != runUID {
			t.Errorf("run directory: %v, %v", fi.Mode(), err)
		}
	})
}

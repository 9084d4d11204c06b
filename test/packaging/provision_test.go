package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/internal/testutil"
)

// repo is the repository root, relative to this package.
const repo = "../.."

// fakes are stand-ins for the package managers and tools .ci/provision
// drives. Each logs its command line to $FAKE_LOG and answers from FAKE_*
// variables, so the script's decisions can be read back without installing
// or downloading anything.
var fakes = map[string]string{
	"dpkg-query": `for p in $FAKE_INSTALLED; do [ "$p" = "$3" ] && { printf 'install ok installed'; exit 0; }; done; exit 1`,
	"rpm":        `for p in $FAKE_INSTALLED; do [ "$p" = "$3" ] && exit 0; done; exit 1`,
	"id":         `echo "${FAKE_UID:-0}"`,
	"apt-cache":  `echo "golang-go:"; echo "  Installed: (none)"; echo "  Candidate: $FAKE_DISTRO_GO"`,
	"dpkg":       `[ "$1" = --print-foreign-architectures ] && echo "$FAKE_FOREIGN"; exit 0`,
	// Installing the distribution's Go puts a go of that version on the PATH.
	// FAKE_APT_FAILS names the apt-get command (update, install) that
	// fails, as apt does: a message on stderr, exit 100.
	"apt-get": `[ "$1" = "$FAKE_APT_FAILS" ] && { echo "E: $1 failed" >&2; exit 100; }
case " $* " in *" -y "*" golang-go "*) echo "go$(echo "$FAKE_DISTRO_GO" | sed 's/^[0-9]*://; s/~.*//')" >"$FAKE_DIR/goversion"; cp "$FAKE_DIR/go" "$FAKE_BIN/go";; esac`,
	"dnf":             `[ "$2" = repoquery ] && { echo "$FAKE_DISTRO_GO"; echo; }; exit 0`,
	"curl":            `while [ $# -gt 1 ]; do [ "$1" = -o ] && echo "not a go archive" >"$2"; shift; done`,
	"apparmor_parser": `exit 0`,
}

// fakeGo answers as a go of the version in $FAKE_DIR/goversion, with
// GOTOOLCHAIN from $FAKE_DIR/gotoolchain, which `go env -w` sets.
const fakeGo = `#!/bin/sh
echo "go $*" >>"$FAKE_LOG"
case "$*" in
version) echo "go version $(cat "$FAKE_DIR/goversion") linux/amd64" ;;
"env GOVERSION") cat "$FAKE_DIR/goversion" ;;
"env GOTOOLCHAIN") cat "$FAKE_DIR/gotoolchain" ;;
"env GOPROXY") echo https://proxy.golang.org,direct ;;
"env -w GOTOOLCHAIN="*) echo "${3#GOTOOLCHAIN=}" >"$FAKE_DIR/gotoolchain" ;;
esac
`

// tools are the real programs the script may use besides the fakes.
var tools = []string{"sh", "sed", "grep", "cat", "mkdir", "rm", "ln", "dirname", "mktemp", "tar", "sha256sum", "uname", "tr", "basename", "chmod", "cut", "cp"}

type provision struct {
	osRelease   string // /etc/os-release
	goVersion   string // "" means no go on the PATH
	goToolchain string // go env GOTOOLCHAIN; "" means local, as distributions ship it
	installed   []string
	distroGo    string // the distribution's Go package version
	uid         string
	foreign     string // dpkg --print-foreign-architectures
	restricted  bool   // kernel.apparmor_restrict_unprivileged_userns=1
	aptFails    string // the apt-get command that fails: update, install
}

type provisionResult struct {
	code           int
	stdout, stderr string
	log            []string // the fakes' command lines, in order
	root           string
}

// run runs .ci/provision with args against the fakes and a fake root.
func (p provision) run(t *testing.T, args ...string) provisionResult {
	t.Helper()
	dir := t.TempDir()
	bin, root := filepath.Join(dir, "bin"), filepath.Join(dir, "root")
	for _, d := range []string{bin, filepath.Join(root, "etc"), filepath.Join(root, "proc/sys/kernel")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range fakes {
		write(filepath.Join(bin, name), "#!/bin/sh\necho \"$(basename \"$0\") $*\" >>\"$FAKE_LOG\"\n"+body+"\n", 0o755)
	}
	for _, name := range tools {
		path, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	tc := p.goToolchain
	if tc == "" {
		tc = "local"
	}
	write(filepath.Join(dir, "gotoolchain"), tc+"\n", 0o644)
	write(filepath.Join(dir, "go"), fakeGo, 0o755)
	if p.goVersion != "" {
		write(filepath.Join(dir, "goversion"), p.goVersion+"\n", 0o644)
		write(filepath.Join(bin, "go"), fakeGo, 0o755)
	}
	write(filepath.Join(root, "etc/os-release"), p.osRelease, 0o644)
	if p.restricted {
		write(filepath.Join(root, "proc/sys/kernel/apparmor_restrict_unprivileged_userns"), "1\n", 0o644)
	}
	logFile := filepath.Join(dir, "log")
	uid := p.uid
	if uid == "" {
		uid = "0"
	}
	cmd := exec.Command(filepath.Join(repo, ".ci/provision"), args...)
	cmd.Env = []string{
		"PATH=" + bin, "PROVISION_ROOT=" + root, "FAKE_LOG=" + logFile, "FAKE_BIN=" + bin, "FAKE_DIR=" + dir,
		"FAKE_INSTALLED=" + strings.Join(p.installed, " "), "FAKE_DISTRO_GO=" + p.distroGo,
		"FAKE_UID=" + uid, "FAKE_FOREIGN=" + p.foreign, "FAKE_APT_FAILS=" + p.aptFails, "TMPDIR=" + dir,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var log []string
	if data, err := os.ReadFile(logFile); err == nil {
		log = strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	return provisionResult{code, stdout.String(), stderr.String(), log, root}
}

// calls returns the logged command lines that start with prefix.
func (r provisionResult) calls(prefix string) []string {
	var out []string
	for _, l := range r.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func (r provisionResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s\nlog:\n%s", r.code, r.stdout, r.stderr, strings.Join(r.log, "\n"))
}

const (
	debian12 = "ID=debian\nVERSION_ID=\"12\"\n"
	ubuntu24 = "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\n"
	fedora   = "ID=fedora\nVERSION_ID=42\n"
)

func TestProvisionInstallsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: debian12, goVersion: "go1.26.8", installed: []string{"bubblewrap", "gcc"}}.run(t, "bubblewrap", "runc", "gcc", "libseccomp-dev")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if got, want := r.calls("apt-get"), []string{"apt-get update -qq", "apt-get install -y -qq --no-install-recommends runc libseccomp-dev"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("apt-get calls = %q, want %q", got, want)
	}

	r = provision{osRelease: debian12, goVersion: "go1.26.8", installed: []string{"bubblewrap", "runc"}}.run(t, "bubblewrap", "runc")
	if r.code != 0 || len(r.calls("apt-get")) != 0 {
		t.Errorf("nothing missing, yet:\n%v", r)
	}
}

func TestProvisionFedoraNames(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: fedora, goVersion: "go1.26.8", installed: []string{"bubblewrap"}}.run(t, "bubblewrap", "libseccomp-dev", "libc6-dev", "pkg-config", "iproute2", "procps", "runc")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if got := r.calls("dnf install"); len(got) != 1 || got[0] != "dnf install -y -q --skip-unavailable libseccomp-devel glibc-devel pkgconf-pkg-config iproute procps-ng runc" {
		t.Errorf("dnf install calls = %q", got)
	}
	if len(r.calls("apt-get")) != 0 || len(r.calls("go env -w")) != 0 {
		t.Errorf("apt-get or go env -w on Fedora without --vm:\n%v", r)
	}
	// The fake dnf installs nothing: each package is then named as unavailable.
	if !strings.Contains(r.stderr, "runc is not available here") {
		t.Errorf("a package dnf did not install is not named:\n%v", r)
	}

	for _, osr := range []string{fedora, ubuntu24} {
		r = provision{osRelease: osr, goVersion: "go1.26.8", installed: []string{"bubblewrap"}}.run(t, "libseccomp-dev:arm64", "gcc-aarch64-linux-gnu", "bubblewrap")
		if r.code != 0 || !strings.Contains(r.stderr, "need Debian's multiarch archive") || len(r.calls("dnf install")) != 0 || len(r.calls("apt-get")) != 0 || len(r.calls("dpkg --add")) != 0 {
			t.Errorf("Debian's cross-build packages were not left out with a note on %q:\n%v", osr, r)
		}
	}
}

// TestProvisionGo: Go comes from the PATH, else the distribution when it is
// new enough, else (with --vm only) the pinned release archive, and an
// archive whose checksum is wrong is never unpacked.
func TestProvisionGo(t *testing.T) {
	t.Parallel()
	t.Run("too old on the PATH, distribution too old, no --vm", func(t *testing.T) {
		t.Parallel()
		r := provision{osRelease: debian12, goVersion: "go1.19.8", distroGo: "2:1.19~1", installed: []string{"bubblewrap"}}.run(t, "bubblewrap")
		if r.code == 0 || !strings.Contains(r.stderr, "--vm") || !strings.Contains(r.stderr, "1.19") {
			t.Errorf("want a refusal naming --vm and the distribution's 1.19:\n%v", r)
		}
		if len(r.calls("curl")) != 0 || len(r.calls("apt-get install")) != 0 {
			t.Errorf("downloaded or installed without --vm:\n%v", r)
		}
	})
	t.Run("missing, distribution new enough", func(t *testing.T) {
		t.Parallel()
		r := provision{osRelease: ubuntu24, distroGo: "2:1.22~2build1", goToolchain: "auto", installed: []string{"bubblewrap"}}.run(t, "bubblewrap")
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		if got := r.calls("apt-get install"); len(got) != 1 || !strings.HasSuffix(got[0], " golang-go") {
			t.Errorf("apt-get install calls = %q, want the distribution's golang-go", got)
		}
		if len(r.calls("curl")) != 0 {
			t.Errorf("downloaded although the distribution's Go is new enough:\n%v", r)
		}
		if !strings.Contains(r.stderr, "fetches go"+goModGo(t)+" from the module proxy") {
			t.Errorf("no note that go.mod's toolchain will be fetched:\n%v", r)
		}
		// As Ubuntu ships it (GOTOOLCHAIN=local), its Go 1.22 cannot build
		// go.mod's Go: installed, then the fix is named.
		r = provision{osRelease: ubuntu24, distroGo: "2:1.22~2build1", installed: []string{"bubblewrap"}}.run(t, "bubblewrap")
		if r.code == 0 || !strings.Contains(r.stderr, "go env -w GOTOOLCHAIN=auto") || len(r.calls("apt-get install")) != 1 {
			t.Errorf("want golang-go installed, then a failure naming GOTOOLCHAIN=auto:\n%v", r)
		}
	})
	t.Run("missing, as a user", func(t *testing.T) {
		t.Parallel()
		r := provision{osRelease: ubuntu24, distroGo: "2:1.22~2build1", uid: "1000"}.run(t)
		if r.code == 0 || !strings.Contains(r.stderr, "run as root") || len(r.calls("apt-get")) != 0 {
			t.Errorf("want a refusal naming root and no apt-get:\n%v", r)
		}
	})
	t.Run("missing, distribution too old, --vm", func(t *testing.T) {
		t.Parallel()
		installed := []string{"make", "git", "curl", "ca-certificates"}
		r := provision{osRelease: debian12, distroGo: "2:1.19~1", installed: installed}.run(t, "--vm")
		want := "curl -fsSL -o " // then the temporary file, then the URL
		got := r.calls(want)
		url := "https://go.dev/dl/go1.26.1.linux-" + runtime.GOARCH + ".tar.gz"
		if len(got) != 1 || !strings.HasSuffix(got[0], " "+url) {
			t.Fatalf("curl calls = %q, want one of %s:\n%v", got, url, r)
		}
		// The fake archive's checksum is wrong: the script must refuse it.
		if r.code == 0 || !strings.Contains(r.stderr, "SHA-256") {
			t.Errorf("a download with the wrong checksum was accepted:\n%v", r)
		}
		if _, err := os.Stat(filepath.Join(r.root, "usr/local/go")); err == nil {
			t.Errorf("an unverified archive was unpacked")
		}
	})
}

// TestProvisionVM: --vm lets go fetch go.mod's toolchain and, under
// Ubuntu's AppArmor restriction, loads a profile for bwrap; without --vm the
// host's policy is left alone and a note names the fix.
func TestProvisionVM(t *testing.T) {
	t.Parallel()
	base := []string{"make", "git", "curl", "ca-certificates"}
	r := provision{osRelease: ubuntu24, goVersion: "go1.22.2", installed: base, restricted: true}.run(t, "--vm")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if got := r.calls("go env -w"); len(got) != 1 || got[0] != "go env -w GOTOOLCHAIN=auto" {
		t.Errorf("go env -w calls = %q, want GOTOOLCHAIN=auto", got)
	}
	if !strings.Contains(r.stderr, "from the module proxy (GOTOOLCHAIN=auto") {
		t.Errorf("no note that go.mod's toolchain will be fetched once GOTOOLCHAIN=auto:\n%v", r)
	}
	profile := filepath.Join(r.root, "etc/apparmor.d/agentjail-bwrap")
	data, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"profile agentjail-bwrap /usr/bin/bwrap flags=(unconfined) {", "  userns,", "abi <abi/4.0>,"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("AppArmor profile lacks %q:\n%s", want, data)
		}
	}
	if got := r.calls("apparmor_parser"); len(got) != 1 || got[0] != "apparmor_parser -r "+profile {
		t.Errorf("apparmor_parser calls = %q", got)
	}

	r = provision{osRelease: ubuntu24, goVersion: "go1.22.2", goToolchain: "auto", installed: base}.run(t, "--vm")
	if r.code != 0 || len(r.calls("go env -w")) != 0 || len(r.calls("apparmor_parser")) != 0 {
		t.Errorf("GOTOOLCHAIN already auto and no AppArmor restriction, yet:\n%v", r)
	}

	r = provision{osRelease: ubuntu24, goVersion: "go1.26.8", restricted: true}.run(t)
	if r.code != 0 || !strings.Contains(r.stderr, "docs/apparmor.md") {
		t.Errorf("want a note naming the fix:\n%v", r)
	}
	if len(r.calls("apparmor_parser")) != 0 || len(r.calls("go env -w")) != 0 {
		t.Errorf("changed the host without --vm:\n%v", r)
	}
}

func TestProvisionMultiarch(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: debian12, goVersion: "go1.26.8"}.run(t, "libseccomp-dev:arm64")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if got := r.calls("dpkg --add-architecture"); len(got) != 1 || got[0] != "dpkg --add-architecture arm64" {
		t.Errorf("dpkg --add-architecture calls = %q", got)
	}
	r = provision{osRelease: debian12, goVersion: "go1.26.8", foreign: "arm64"}.run(t, "libseccomp-dev:arm64")
	if r.code != 0 || len(r.calls("dpkg --add-architecture")) != 0 {
		t.Errorf("arm64 already added, yet:\n%v", r)
	}
}

// TestProvisionBadUsage: an option the script does not know is refused,
// never taken for a package name.
func TestProvisionBadUsage(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: debian12, goVersion: "go1.26.8"}.run(t, "--dryrun", "bubblewrap")
	if r.code != 1 || !strings.Contains(r.stderr, "unknown option --dryrun; usage: ") || len(r.log) != 0 {
		t.Errorf("want exit 1 naming the option and the usage, and nothing run:\n%v", r)
	}
	// After --, a name is a package whatever it looks like.
	r = provision{osRelease: debian12, goVersion: "go1.26.8", installed: []string{"-odd"}}.run(t, "--", "-odd")
	if r.code != 0 || r.stdout != "packages: all 1 installed, nothing to install\n" {
		t.Errorf("-- then a package: %v", r)
	}
}

// TestProvisionAptFails: when apt-get fails, the script says which step
// failed and for what, and exits 1 (not apt's 100), apt's own message kept.
func TestProvisionAptFails(t *testing.T) {
	t.Parallel()
	for step, want := range map[string]string{
		"update":  "agentjail provision: apt-get update failed (exit 100; its messages are above)",
		"install": "agentjail provision: apt-get install failed (exit 100; its messages are above) for: runc libseccomp-dev;",
	} {
		r := provision{osRelease: debian12, goVersion: "go1.26.8", aptFails: step}.run(t, "runc", "libseccomp-dev")
		if r.code != 1 || !strings.Contains(r.stderr, "E: "+step+" failed\n") || !strings.Contains(r.stderr, want) {
			t.Errorf("apt-get %s fails: want exit 1, apt's message and %q:\n%v", step, want, r)
		}
		if step == "update" && len(r.calls("apt-get install")) != 0 {
			t.Errorf("went on to install after the update failed:\n%v", r)
		}
	}
}

func TestProvisionUnknownDistribution(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: "ID=alpine\n", goVersion: "go1.26.8"}.run(t, "bubblewrap")
	if r.code == 0 || !strings.Contains(r.stderr, "unsupported distribution") {
		t.Errorf("%v", r)
	}
}

// makeVar returns the words of a Makefile variable assignment `NAME := ...`.
func makeVar(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s*:?=(.*)$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("Makefile has no %s", name)
	}
	return strings.Fields(string(m[1]))
}

// TestProvisionHere runs the real script on this machine, as `make deps`
// does, with the real package manager: every package of the Makefile's
// lists is installed here, so it must succeed, say so and install nothing;
// then --dry-run with one package that is not installed must name exactly
// that one (apt-get's simulation resolving it) and leave it uninstalled, and
// a name apt does not know must fail naming it.
func TestProvisionHere(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	pkgs := append(makeVar(t, "RUNTIME_PKGS"), makeVar(t, "TEST_PKGS")...)
	for _, p := range pkgs {
		if !dpkgInstalled(t, p) {
			t.Fatalf("%s is not installed: run make deps first", p)
		}
	}
	provision := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(repo, ".ci/provision"), args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := provision(pkgs...)
	if want := fmt.Sprintf("packages: all %d installed, nothing to install\n", len(pkgs)); err != nil || stdout != want {
		t.Errorf(".ci/provision %s: %v\nstdout: %q, want %q\nstderr: %s", pkgs, err, stdout, want, stderr)
	}

	absent := notInstalled(t)
	stdout, stderr, err = provision(append([]string{"--dry-run", absent}, pkgs...)...)
	if want := "would install: " + absent + "\n"; err != nil || stdout != want {
		t.Errorf(".ci/provision --dry-run %s ...: %v\nstdout: %q, want %q\nstderr: %s", absent, err, stdout, want, stderr)
	}
	if dpkgInstalled(t, absent) {
		t.Errorf("--dry-run installed %s", absent)
	}

	const bogus = "agentjail-no-such-package"
	_, stderr, err = provision("--dry-run", bogus)
	if err == nil || !strings.Contains(stderr, "apt-get cannot install: "+bogus) {
		t.Errorf(".ci/provision --dry-run %s: %v, want a failure naming it; stderr:\n%s", bogus, err, stderr)
	}
}

// provisioned returns the packages each .ci/provision line of `make -n
// target` names.
func provisioned(t *testing.T, target string) [][]string {
	t.Helper()
	plan, err := exec.Command("make", "-C", repo, "-n", target).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, plan)
	}
	var lines [][]string
	for _, line := range strings.Split(string(plan), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasSuffix(f[0], ".ci/provision") {
			lines = append(lines, f[1:])
		}
	}
	return lines
}

// TestMakeTestAddsNoArchitecture: make test installs no cross-build
// package, which would add dpkg's arm64 architecture to the machine; make
// test-release and make release install them all.
func TestMakeTestAddsNoArchitecture(t *testing.T) {
	t.Parallel()
	release := makeVar(t, "RELEASE_PKGS")
	for _, target := range []string{"test", "deps", "demo", "escapes", "bench"} {
		for _, pkgs := range provisioned(t, target) {
			for _, p := range pkgs {
				if slices.Contains(release, p) || strings.Contains(p, ":") {
					t.Errorf("make %s installs %s, a cross-build package", target, p)
				}
			}
		}
	}
	for _, target := range []string{"test-release", "release"} {
		lines := provisioned(t, target)
		if len(lines) != 1 {
			t.Fatalf("make %s: %d provision lines, want 1: %q", target, len(lines), lines)
		}
		for _, p := range release {
			if !slices.Contains(lines[0], p) {
				t.Errorf("make %s does not install %s: %q", target, p, lines[0])
			}
		}
	}
}

func dpkgInstalled(t *testing.T, pkg string) bool {
	t.Helper()
	status, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", pkg).Output()
	return strings.Contains(string(status), "ok installed")
}

// notInstalled names a small package apt could install here but that is not
// installed (none of agentjail's lists names these).
func notInstalled(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"sl", "cowsay", "figlet", "fortune-mod", "bsdgames"} {
		out, err := exec.Command("apt-cache", "policy", p).Output()
		if err == nil && regexp.MustCompile(`(?m)^\s*Candidate: [^(]`).Match(out) && !dpkgInstalled(t, p) {
			return p
		}
	}
	t.Fatal("no uninstalled package with an install candidate among sl, cowsay, figlet, fortune-mod, bsdgames: is the apt index there (apt-get update)?")
	return ""
}

// TestProvisionDryRun: --dry-run names what is missing and changes nothing,
// without root.
func TestProvisionDryRun(t *testing.T) {
	t.Parallel()
	r := provision{osRelease: debian12, goVersion: "go1.26.8", installed: []string{"bubblewrap"}, uid: "1000"}.run(t, "--dry-run", "bubblewrap", "runc", "libseccomp-dev")
	if r.code != 0 || r.stdout != "would install: runc libseccomp-dev\n" {
		t.Errorf("want exit 0 and exactly \"would install: runc libseccomp-dev\":\n%v", r)
	}
	if got := r.calls("apt-get"); len(got) != 1 || got[0] != "apt-get install -s -qq --no-install-recommends runc libseccomp-dev" {
		t.Errorf("apt-get calls = %q, want only the simulation", got)
	}

	r = provision{osRelease: debian12, goVersion: "go1.26.8"}.run(t, "--dry-run", "libseccomp-dev:arm64")
	if r.code != 0 || !strings.Contains(r.stdout, "would add dpkg's arm64 architecture") || len(r.calls("dpkg --add")) != 0 || len(r.calls("apt-get")) != 0 {
		t.Errorf("--dry-run with a foreign architecture changed something or did not say so:\n%v", r)
	}

	r = provision{osRelease: debian12, distroGo: "2:1.19~1", installed: []string{"make", "git", "curl", "ca-certificates"}, uid: "1000"}.run(t, "--vm", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would download Go 1.26.1") || len(r.calls("curl")) != 0 || len(r.calls("apt-get")) != 0 {
		t.Errorf("--vm --dry-run without Go: want the download named, nothing done:\n%v", r)
	}
}

// goModGo is go.mod's go line: the Go that builds agentjail.
func goModGo(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// TestProvisionGoMod: a go on the PATH that cannot build go.mod's Go is
// refused before anything is installed, with what is needed and both fixes;
// with GOTOOLCHAIN=auto it passes with a note that the toolchain is fetched.
func TestProvisionGoMod(t *testing.T) {
	t.Parallel()
	need := goModGo(t)
	r := provision{osRelease: debian12, goVersion: "go1.24.4"}.run(t, "bubblewrap")
	for _, want := range []string{"go.mod needs Go >= " + need, "is go1.24.4", "GOTOOLCHAIN=local", "https://go.dev/dl", "go env -w GOTOOLCHAIN=auto"} {
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("want a failure saying %q:\n%v", want, r)
		}
	}
	if len(r.calls("apt-get")) != 0 || len(r.calls("dpkg-query")) != 0 {
		t.Errorf("went on to the packages before refusing the go:\n%v", r)
	}

	r = provision{osRelease: debian12, goVersion: "go1.24.4", goToolchain: "auto"}.run(t, "bubblewrap")
	if r.code != 0 || !strings.Contains(r.stderr, "fetches go"+need+" from the module proxy") || len(r.calls("apt-get install")) != 1 {
		t.Errorf("GOTOOLCHAIN=auto: want the packages installed and a note that go%s is fetched:\n%v", need, r)
	}
}

// TestGoCheck runs .ci/gocheck (what `make build` runs first) against a
// fake go of each version, and against the real one.
func TestGoCheck(t *testing.T) {
	t.Parallel()
	need := goModGo(t)
	gocheck := func(path string, env ...string) (int, string) {
		cmd := exec.Command(filepath.Join(repo, ".ci/gocheck"))
		cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir()}, env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	fake := func(version, toolchain string) string {
		dir := t.TempDir()
		for name, body := range map[string]string{
			"go":          fakeGo,
			"goversion":   version + "\n",
			"gotoolchain": toolchain + "\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	sys := "/usr/bin:/bin"
	for _, c := range []struct {
		version, toolchain string
		code               int
		want               []string
	}{
		{"go1.24.4", "local", 1, []string{"go.mod needs Go >= " + need + ", but ", "/go is go1.24.4 and GOTOOLCHAIN=local", "install Go >= " + need + " from https://go.dev/dl", "go env -w GOTOOLCHAIN=auto"}},
		{"go1.24.4", "auto", 0, []string{"note: ", "fetches go" + need + " from the module proxy (GOTOOLCHAIN=auto"}},
		{"go1.24.4", "go1.24.4+auto", 0, []string{"from the module proxy"}},
		{"go1.20.14", "auto", 1, []string{"is go1.20.14, too old to fetch a newer toolchain itself", "https://go.dev/dl"}},
		{"go" + need, "local", 0, nil},
		{"go1.99.0 X:nocoverageredesign", "local", 0, nil},
		{"devel go1.27-abcdef", "local", 0, nil},
		{"garbage", "local", 1, []string{"cannot tell the version of", "'garbage'"}},
	} {
		dir := fake(c.version, c.toolchain)
		code, out := gocheck(dir+":"+sys, "FAKE_DIR="+dir, "FAKE_LOG=/dev/null")
		if code != c.code {
			t.Errorf("go %q, GOTOOLCHAIN=%s: exit %d, want %d\n%s", c.version, c.toolchain, code, c.code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("go %q, GOTOOLCHAIN=%s: output lacks %q:\n%s", c.version, c.toolchain, w, out)
			}
		}
		if c.want == nil && out != "" {
			t.Errorf("go %q: want silence, got:\n%s", c.version, out)
		}
	}
	if code, out := gocheck(sys); code != 1 || !strings.Contains(out, "go is not on the PATH and go.mod needs Go >= "+need) {
		t.Errorf("no go: exit %d\n%s", code, out)
	}
	// make build checks before it builds: the old go is never asked to.
	dir, log := fake("go1.24.4", "local"), filepath.Join(t.TempDir(), "log")
	cmd := exec.Command("make", "-C", repo, "build", "BIN="+filepath.Join(dir, "agentjail"))
	cmd.Env = []string{"PATH=" + dir + ":" + sys, "FAKE_DIR=" + dir, "FAKE_LOG=" + log, "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	calls, _ := os.ReadFile(log)
	if err == nil || !strings.Contains(string(out), "go.mod needs Go >= "+need) || strings.Contains(string(calls), "go build") {
		t.Errorf("make build with go1.24.4 and GOTOOLCHAIN=local: %v, want a failure from the check before any go build\n%s\ngo calls:\n%s", err, out, calls)
	}
	// The go this test runs under builds the module: the check must agree.
	real, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	if code, out := gocheck(filepath.Dir(real) + ":" + sys); code != 0 || out != "" {
		t.Errorf("the real go (%s): exit %d, want 0 and silence:\n%s", real, code, out)
	}
}

package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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
	"apt-get":         `case " $* " in *" golang-go "*) printf '#!/bin/sh\necho "$0 $*" >>"$FAKE_LOG"\n[ "$1 $2" = "env GOVERSION" ] && echo go%s\nexit 0\n' "$(echo "$FAKE_DISTRO_GO" | sed 's/^[0-9]*://; s/~.*//')" >"$FAKE_BIN/go"; chmod +x "$FAKE_BIN/go";; esac`,
	"dnf":             `[ "$2" = repoquery ] && { echo "$FAKE_DISTRO_GO"; echo; }; exit 0`,
	"curl":            `while [ $# -gt 1 ]; do [ "$1" = -o ] && echo "not a go archive" >"$2"; shift; done`,
	"apparmor_parser": `exit 0`,
}

// tools are the real programs the script may use besides the fakes.
var tools = []string{"sh", "sed", "grep", "cat", "mkdir", "rm", "ln", "dirname", "mktemp", "tar", "sha256sum", "uname", "tr", "basename", "chmod", "cut"}

type provision struct {
	osRelease   string // /etc/os-release
	goVersion   string // "" means no go on the PATH
	installed   []string
	distroGo    string // the distribution's Go package version
	uid         string
	foreign     string // dpkg --print-foreign-architectures
	restricted  bool   // kernel.apparmor_restrict_unprivileged_userns=1
	goToolchain string
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
	if p.goVersion != "" {
		tc := p.goToolchain
		if tc == "" {
			tc = "local"
		}
		write(filepath.Join(bin, "go"), "#!/bin/sh\necho \"go $*\" >>\"$FAKE_LOG\"\ncase \"$1 $2\" in\n\"env GOVERSION\") echo "+p.goVersion+";;\n\"env GOTOOLCHAIN\") echo "+tc+";;\nesac\n", 0o755)
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
		"PATH=" + bin, "PROVISION_ROOT=" + root, "FAKE_LOG=" + logFile, "FAKE_BIN=" + bin,
		"FAKE_INSTALLED=" + strings.Join(p.installed, " "), "FAKE_DISTRO_GO=" + p.distroGo,
		"FAKE_UID=" + uid, "FAKE_FOREIGN=" + p.foreign, "TMPDIR=" + dir,
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
	r := provision{osRelease: fedora, goVersion: "go1.24.4", installed: []string{"bubblewrap"}}.run(t, "bubblewrap", "libseccomp-dev", "pkg-config", "iproute2", "procps", "runc")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if got := r.calls("dnf install"); len(got) != 1 || got[0] != "dnf install -y -q --skip-unavailable libseccomp-devel pkgconf-pkg-config iproute procps-ng runc" {
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
		r = provision{osRelease: osr, goVersion: "go1.24.4", installed: []string{"bubblewrap"}}.run(t, "libseccomp-dev:arm64", "gcc-aarch64-linux-gnu", "bubblewrap")
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
		r := provision{osRelease: ubuntu24, distroGo: "2:1.22~2build1", installed: []string{"bubblewrap"}}.run(t, "bubblewrap")
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		if got := r.calls("apt-get install"); len(got) != 1 || !strings.HasSuffix(got[0], " golang-go") {
			t.Errorf("apt-get install calls = %q, want the distribution's golang-go", got)
		}
		if len(r.calls("curl")) != 0 {
			t.Errorf("downloaded although the distribution's Go is new enough:\n%v", r)
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

	r = provision{osRelease: ubuntu24, goVersion: "go1.22.2", restricted: true}.run(t)
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
// does: it must succeed and leave every package of the Makefile's lists
// installed.
func TestProvisionHere(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	pkgs := append(makeVar(t, "RUNTIME_PKGS"), makeVar(t, "TEST_PKGS")...)
	out, err := exec.Command(filepath.Join(repo, ".ci/provision"), pkgs...).CombinedOutput()
	if err != nil {
		t.Fatalf(".ci/provision %s: %v\n%s", pkgs, err, out)
	}
	for _, p := range pkgs {
		status, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(status), "ok installed") {
			t.Errorf("%s is not installed after provisioning: %s", p, status)
		}
	}
}

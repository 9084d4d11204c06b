package packaging

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestRelease runs `make release`'s script: both binaries are cgo builds for
// their architecture that link libseccomp, are stamped with the version,
// and are listed in SHA256SUMS; the one for this machine runs. Next to each,
// agentjail-init, agentjail-exec and agentjail-run are static and listed too. `make test-release` runs it
// (CI does, after make test), having installed the cross toolchain, which
// adds dpkg's arm64 architecture: make test leaves it out, changing no
// architecture of the machine it runs on.
func TestRelease(t *testing.T) {
	t.Parallel()
	if os.Getenv("AGENTJAIL_TEST_RELEASE") == "" {
		t.Skip("the release build is tested by make test-release, which installs the arm64 cross toolchain")
	}
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Fatal("needs Debian's cross toolchain (gcc-aarch64-linux-gnu, libseccomp-dev:arm64), which make test-release installs on Debian only")
	}
	out := t.TempDir()
	const version = "v0.0.0-releasetest"
	cmd := exec.Command(filepath.Join(repo, ".ci/release"), out)
	cmd.Env = append(os.Environ(), "VERSION="+version)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf(".ci/release: %v\n%s", err, b)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		name := "agentjail-" + version + "-linux-" + arch
		bin := filepath.Join(out, name)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		libs, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != machine || !slices.Contains(libs, "libseccomp.so.2") {
			t.Errorf("%s: machine %v, libraries %v; want %v linking libseccomp.so.2", name, f.Machine, libs, machine)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+name+"\n") {
			t.Errorf("SHA256SUMS lacks %s's checksum:\n%s", name, sums)
		}
		if arch == runtime.GOARCH {
			got, err := exec.Command(bin, "version").Output()
			if err != nil || !strings.HasPrefix(string(got), "agentjail "+version+" (") {
				t.Errorf("%s version: %v\n%s", name, err, got)
			}
		}
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		for _, bin := range []string{"agentjail-init", "agentjail-exec", "agentjail-run"} {
			name := bin + "-" + version + "-linux-" + arch
			f, err := elf.Open(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			libs, _ := f.ImportedLibraries()
			f.Close()
			if f.Machine != machine || len(libs) != 0 {
				t.Errorf("%s: machine %v, libraries %v; want a static %v binary", name, f.Machine, libs, machine)
			}
			if !strings.Contains(string(sums), "  "+name+"\n") {
				t.Errorf("SHA256SUMS lacks %s:\n%s", name, sums)
			}
		}
	}
	if got, err := exec.Command("file", filepath.Join(out, "agentjail-"+version+"-linux-arm64")).Output(); err != nil || !strings.Contains(string(got), "ARM aarch64") {
		t.Errorf("file on the arm64 binary: %v\n%s", err, got)
	}
}

// TestReleaseRefusesNoCgo: a build without cgo has no seccomp; the release
// check refuses it, and the binary itself refuses a profile with a filter
// instead of running without one.
func TestReleaseRefusesNoCgo(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "agentjail")
	build := exec.Command("go", "build", "-o", bin, "github.com/agentjail/agentjail/cmd/agentjail")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(repo, ".ci/release"), "--check", runtime.GOARCH, bin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "built without cgo") {
		t.Errorf(".ci/release --check accepted a build without cgo: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "render", "--profile", "tier1", "--", "true").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "built without cgo") {
		t.Errorf("a build without cgo rendered tier1 (which has a seccomp filter): %v\n%s", err, out)
	}
}

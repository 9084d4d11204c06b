//go:build linux && cgo

package seccomp

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// externalProfile reads a real-world profile fetched by `make test`
// (.ci/profiles): Docker's default and Podman's, both in Docker's format.
func externalProfile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/external", name))
	if err != nil {
		t.Skipf("%v: run `make test` (or .ci/profiles seccomp/testdata/external) to fetch it", err)
	}
	return data
}

// TestDockerDefaultProfileImportsAsIs: Docker's own default profile (and
// Podman's) import unchanged, compile, and mean for a jail what they mean
// for a container without capabilities.
func TestDockerDefaultProfileImportsAsIs(t *testing.T) {
	t.Parallel()
	if Native() != "amd64" {
		t.Skip("the rows below use amd64's i386 sub-architecture")
	}
	enosys38 := uint32(retErrno | 38)
	for _, tc := range []struct {
		file          string
		allow, refuse []string
		rows          []want
		i386Mount     uint32
	}{
		{"docker-default.json",
			[]string{"read", "write", "execve", "mkdir", "socket", "personality", "arch_prctl", "ptrace"},
			[]string{"mount", "umount2", "unshare", "setns", "pivot_root", "reboot", "init_module", "keyctl", "bpf"},
			[]want{
				{"clone", [6]uint64{sigchld}, retAllow},
				{"clone", [6]uint64{unix.CLONE_NEWUSER | sigchld}, eperm_},
				{"clone3", [6]uint64{}, enosys_},
				{"personality", [6]uint64{0x40000}, eperm_},
			}, eperm_},
		// Podman's is looser (rootless containers mount and unshare) and
		// refuses unknown calls with ENOSYS.
		{"containers-default.json",
			[]string{"read", "write", "execve", "mkdir", "socket", "mount", "unshare"},
			[]string{"kexec_load", "bpf", "init_module", "userfaultfd"},
			[]want{{"personality", [6]uint64{0x40000}, enosys38}},
			retAllow},
	} {
		file := tc.file
		f, err := Import(file, externalProfile(t, file), CurrentHost())
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		p := []program{load(t, f)}
		check(t, p, rows(retAllow, tc.allow...))
		check(t, p, rows(eperm_, tc.refuse...))
		check(t, p, tc.rows)
		// Both list i386 as a sub-architecture of amd64: its syscalls are
		// governed by the rules, not killed.
		if got := verdict(t, p, sc{arch: unix.AUDIT_ARCH_I386, nr: 20}); got != retAllow {
			t.Errorf("%s: i386 getpid: got %#x, want allow", file, got)
		}
		if got := verdict(t, p, sc{arch: unix.AUDIT_ARCH_I386, nr: 21}); got != tc.i386Mount {
			t.Errorf("%s: i386 mount: got %#x, want %#x", file, got, tc.i386Mount)
		}
		// With CAP_SYS_ADMIN the same file allows mounting: includes work.
		admin := CurrentHost()
		admin.Caps = []string{"CAP_SYS_ADMIN"}
		f, err = Import(file, externalProfile(t, file), admin)
		if err != nil {
			t.Fatal(err)
		}
		if got := verdict(t, []program{load(t, f)}, sc{arch: nativeAudit(t), nr: nr(t, "setns")}); got != retAllow {
			t.Errorf("%s with CAP_SYS_ADMIN: setns: got %#x, want allow", file, got)
		}
	}
}

// TestFiltersCompose: a file that refuses mkdir adds to the built-in
// filter; neither lifts the other's refusals.
func TestFiltersCompose(t *testing.T) {
	t.Parallel()
	f, err := Import("deny-mkdir.json", []byte(`{"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
		             {"names": ["ptrace"], "action": "SCMP_ACT_ALLOW"}]}`), CurrentHost())
	if err != nil {
		t.Fatal(err)
	}
	p := []program{load(t, Builtin(false)), load(t, f)}
	check(t, p, rows(retErrno|13, "mkdir", "mkdirat"))
	check(t, p, rows(eperm_, "ptrace", "keyctl"))
	check(t, p, rows(retAllow, "read", "unshare"))
}

// TestExportCompilesToTheSameProgram: export then import gives the very
// same BPF, for every built-in filter and the container profile.
func TestExportCompilesToTheSameProgram(t *testing.T) {
	t.Parallel()
	container, err := ForContainer()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Filter{Builtin(false), Builtin(true), container} {
		data, err := Export(f)
		if err != nil {
			t.Fatal(err)
		}
		strictOCI(t, data)
		back, err := Import("exported.json", data, CurrentHost())
		if err != nil {
			t.Fatal(err)
		}
		a, err := Compile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Compile(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the re-imported export compiles to a different program", f.Source)
		}
	}
}

// TestUnknownSyscallIsLocated: Import names the file, the line and column
// of the misspelt name, its JSON path and the name; Compile, given a
// filter built elsewhere, still refuses it.
func TestUnknownSyscallIsLocated(t *testing.T) {
	t.Parallel()
	_, err := Import("typo.json", []byte(`{"defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [
    {"names": ["rmdir"], "action": "SCMP_ACT_ERRNO"},
    {"names": [
      "mkdir",
      "mkdri"
    ], "action": "SCMP_ACT_ERRNO"},
    {"name": "chmdo", "action": "SCMP_ACT_ERRNO"}
  ]}`), CurrentHost())
	if !errors.Is(err, ErrUnknownSyscall) {
		t.Fatalf("got %v, want ErrUnknownSyscall", err)
	}
	for _, s := range []string{`typo.json:6:7: syscalls[1].names[1]: unknown syscall "mkdri"`, `typo.json:8:14: syscalls[2].name: unknown syscall "chmdo"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	_, err = Compile(Filter{Source: "hand-made", Default: Action{Kind: Allow}, Rules: []Rule{{Syscalls: []string{"mkdri"}, Action: eperm, Origin: "rule 1"}}})
	if !errors.Is(err, ErrUnknownSyscall) || !strings.Contains(err.Error(), `hand-made: rule 1: unknown syscall "mkdri"`) {
		t.Errorf("Compile: got %v, want ErrUnknownSyscall naming the rule", err)
	}
}

// TestArchOnlySyscalls: a call of our per-architecture table is placed by
// number where the architecture has it and skipped where it does not.
func TestArchOnlySyscalls(t *testing.T) {
	t.Parallel()
	f, err := Import("arch.json", []byte(`{"defaultAction": "SCMP_ACT_ALLOW",
		"syscalls": [{"names": ["uretprobe", "riscv_hwprobe"], "action": "SCMP_ACT_ERRNO"}]}`), CurrentHost())
	if err != nil {
		t.Fatal(err)
	}
	p := []program{load(t, f)}
	for name, nums := range archSyscalls {
		n, ok := nums[Native()]
		if !ok {
			continue
		}
		if got := verdict(t, p, sc{arch: nativeAudit(t), nr: int32(n)}); got != eperm_ {
			t.Errorf("%s (%d): got %#x, want EPERM", name, n, got)
		}
	}
	if got := verdict(t, p, sc{arch: nativeAudit(t), nr: 258}); Native() != "riscv64" && got != retAllow {
		t.Errorf("nr 258 (riscv_hwprobe only on riscv64): got %#x, want allow", got)
	}
}

// TestNumberedSyscallOnExtraArch: a refusal that libseccomp can place only
// by number cannot cover another architecture, and says so; an allow
// under a refusing default is simply left to the default there.
func TestNumberedSyscallOnExtraArch(t *testing.T) {
	t.Parallel()
	deny, _ := Import("deny.json", []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
		"syscalls": [{"names": ["mseal"], "action": "SCMP_ACT_ERRNO"}]}`), CurrentHost())
	if _, err := Compile(deny); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"mseal"`) {
		t.Errorf("got %v, want ErrUnsupported naming mseal", err)
	}
	allowed, _ := Import("allow.json", []byte(`{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
		"syscalls": [{"names": ["mseal", "read"], "action": "SCMP_ACT_ALLOW"}]}`), CurrentHost())
	p := []program{load(t, allowed)}
	check(t, p, rows(retAllow, "mseal", "read"))
}

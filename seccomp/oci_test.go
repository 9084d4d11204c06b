package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var amd64NoCaps = Host{Arch: "amd64", Kernel: [2]int{6, 18}}

func allow(names ...string) Rule { return Rule{Syscalls: names, Action: Action{Kind: Allow}} }

// TestImportDockerFormat: archMap picks the native architecture's
// sub-architectures; includes/excludes are evaluated for a jail (no
// capabilities, this architecture and kernel); name, comment and errno are
// read.
func TestImportDockerFormat(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/docker-format.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Import("docker-format.json", data, amd64NoCaps)
	if err != nil {
		t.Fatal(err)
	}
	want := Filter{
		Default: eperm,
		Arches:  []Arch{"x86", "x32"},
		Rules: []Rule{
			allow("read", "write", "exit_group"),
			allow("getpid"),
			allow("ptrace"),     // minKernel 4.8 <= 6.18
			allow("arch_prctl"), // amd64
			allow("modify_ldt"), // x86 is in amd64's family (moby's arches())
			{Syscalls: []string{"clone"}, Action: Action{Kind: Allow}, Conds: []Cond{{Arg: 0, Op: MaskedEqual, Value: 2114060288}}},
			{Syscalls: []string{"clone3"}, Action: Action{Kind: Errno, Errno: 38}},
			{Syscalls: []string{"socket"}, Action: Action{Kind: Errno, Errno: 22}, Conds: []Cond{{Arg: 0, Op: Equal, Value: 16}}},
		},
	}
	if !got.Equal(want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}

	// With CAP_SYS_ADMIN on arm64 an older kernel: other entries apply.
	got, err = Import("docker-format.json", data, Host{Arch: "arm64", Caps: []string{"CAP_SYS_ADMIN"}, Kernel: [2]int{2, 6}})
	if err != nil {
		t.Fatal(err)
	}
	want = Filter{Default: eperm, Arches: []Arch{"arm"}, Rules: []Rule{
		allow("read", "write", "exit_group"), allow("getpid"), allow("set_tls"), allow("mount", "unshare"), allow("kill"),
		{Syscalls: []string{"socket"}, Action: Action{Kind: Errno, Errno: 22}, Conds: []Cond{{Arg: 0, Op: Equal, Value: 16}}},
	}}
	if !got.Equal(want) {
		t.Errorf("arm64 with CAP_SYS_ADMIN: got\n%+v\nwant\n%+v", got, want)
	}
}

// TestImportRefuses: every mistake is an error that names the file, where
// it is and what is wrong, never a silently dropped rule.
func TestImportRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		is   error
		says []string
	}{
		{`{"defaultAction": "SCMP_ACT_ALLOW",` + "\n" + `  "syscalls": [}`, ErrSyntax, []string{"bad.json:2:16", "invalid character"}},
		{``, ErrSyntax, []string{"empty file"}},
		{"{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n", ErrSyntax, []string{"bad.json:2:1", "ends early"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW"} {}`, ErrSyntax, []string{"more than one JSON value"}},
		{`{"defautAction": "SCMP_ACT_ALLOW"}`, ErrSyntax, []string{`bad.json:1:18: invalid seccomp profile: unknown field "defautAction"`}},
		{"{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"syscalls\": [{\"names\": [\"a\"],\n  \"acton\": 1}]}", ErrSyntax, []string{`bad.json:3:12: invalid seccomp profile: unknown field "acton"`}},
		{`{"defaultAction": 3}`, ErrSyntax, []string{"bad.json:1:19", "defaultAction"}},
		{`{"syscalls": []}`, ErrSyntax, []string{"defaultAction: invalid seccomp profile is missing"}},
		{`{"defaultAction": "SCMP_ACT_PERMIT"}`, ErrUnknownAction, []string{`bad.json:1:19: defaultAction: unknown action "SCMP_ACT_PERMIT"`, "SCMP_ACT_ALLOW"}},
		{"{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [\n  {\"names\": [\"mkdir\"], \"action\": \"SCMP_ACT_ERRNO\"},\n  {\"names\": [\"mkdir\"],\n   \"action\": \"SCMP_ACT_DENY\"}]}", ErrUnknownAction, []string{`bad.json:4:14: syscalls[1].action: unknown action "SCMP_ACT_DENY"`}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_Z80"]}`, ErrUnknownArch, []string{`bad.json:1:55: architectures[0]: unknown architecture "SCMP_ARCH_Z80"`}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "archMap": [{"architecture": "SCMP_ARCH_Z80"}]}`, ErrUnknownArch, []string{"archMap[0]", "Z80"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}`, ErrUnsupported, []string{"syscalls[0].action", "listener"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_LOG"]}`, ErrUnsupported, []string{"flags"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": [], "action": "SCMP_ACT_ERRNO"}]}`, ErrSyntax, []string{"bad.json:1:60: syscalls[0].names", "empty"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", ""], "action": "SCMP_ACT_ERRNO"}]}`, ErrUnknownSyscall, []string{`bad.json:1:70: syscalls[0].names[1]: unknown syscall ""`}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"name": "a", "names": ["b"], "action": "SCMP_ACT_ERRNO"}]}`, ErrSyntax, []string{"syscalls[0]", "both name and names"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]}`, ErrBadRule, []string{"syscalls[0].args[0].index", "0 to 5"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "op": "SCMP_CMP_ABOUT"}]}]}`, ErrBadRule, []string{"syscalls[0].args[0].op", "SCMP_CMP_ABOUT"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ioctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_EQ"}]}]}`, ErrBadRule, []string{"valueTwo", "MASKED_EQ"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["a"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "four"}}]}`, ErrSyntax, []string{"syscalls[0]", `minKernel "four"`}},
		{`{"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 5000}`, ErrSyntax, []string{"defaultErrnoRet", "5000"}},
		{`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["a"], "action": "SCMP_ACT_ERRNO", "errno": "EWHATEVER"}]}`, ErrSyntax, []string{"syscalls[0].errno", "EWHATEVER"}},
	} {
		_, err := Import("bad.json", []byte(tc.json), amd64NoCaps)
		if err == nil {
			t.Errorf("%s: accepted", tc.json)
			continue
		}
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: %v is not %v", tc.json, err, tc.is)
		}
		for _, s := range append(tc.says, "bad.json") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tc.json, err, s)
			}
		}
	}
}

// strictOCI decodes an exported profile as a strict OCI consumer would:
// into runtime-spec's LinuxSeccomp, refusing any field it does not define.
func strictOCI(t testing.TB, data []byte) specs.LinuxSeccomp {
	t.Helper()
	var s specs.LinuxSeccomp
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("exported profile is not strict OCI: %v\n%s", err, data)
	}
	return s
}

func TestExportIsStrictOCIAndRoundTrips(t *testing.T) {
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
		s := strictOCI(t, data)
		if s.DefaultAction == "" || len(s.Syscalls) == 0 {
			t.Fatalf("%s: exported profile is empty:\n%s", f.Source, data)
		}
		back, err := Import("exported.json", data, amd64NoCaps)
		if err != nil {
			t.Fatalf("%s: re-import: %v", f.Source, err)
		}
		if !back.Equal(f) {
			t.Errorf("%s: round trip changed the filter:\n%+v\n%+v", f.Source, back, f)
		}
	}
	// The masked-equal convention survives: value is the mask, valueTwo the datum.
	data, _ := Export(Builtin(false))
	s := strictOCI(t, data)
	found := false
	for _, sc := range s.Syscalls {
		if reflect.DeepEqual(sc.Names, []string{"ioctl"}) && sc.Args[0].Value == 0xffffffff && sc.Args[0].ValueTwo == tiocsti {
			found = true
		}
	}
	if !found {
		t.Errorf("no ioctl TIOCSTI rule with value=mask, valueTwo=datum in\n%s", data)
	}
}

func TestParseKernel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]int{"6.18.44-fc-v769": {6, 18}, "5.4.0-rc5": {5, 4}, "6.0-rc1": {6, 0}, "4": {4, 0}, "": {0, 0}} {
		if got := ParseKernel(in); got != want {
			t.Errorf("ParseKernel(%q) = %v, want %v", in, got, want)
		}
	}
}

// FuzzImport: no input panics, and whatever imports exports to strict OCI
// JSON that imports back to the same filter.
func FuzzImport(f *testing.F) {
	if data, err := os.ReadFile("testdata/docker-format.json"); err == nil {
		f.Add(data)
	}
	for _, p := range []Filter{Builtin(false), Builtin(true)} {
		data, _ := Export(p)
		f.Add(data)
	}
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":13}]}`))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86"],"syscalls":[{"names":["ioctl"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":255,"valueTwo":3,"op":"SCMP_CMP_MASKED_EQ"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Import("fuzz.json", data, amd64NoCaps)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		out, err := Export(got)
		if err != nil {
			t.Fatal(err)
		}
		strictOCI(t, out)
		back, err := Import("again.json", out, amd64NoCaps)
		if err != nil {
			t.Fatalf("export of an imported profile does not import: %v\n%s", err, out)
		}
		if !back.Equal(got) {
			t.Fatalf("round trip changed the filter:\n%+v\n%+v", got, back)
		}
	})
}

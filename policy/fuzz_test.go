package policy

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the profile loader as a file that
// extends the built-in profiles (and as a parent of another file): no
// input panics or hangs; every error names the file; whatever loads also
// validates, expands and merges without panicking.
func FuzzLoad(f *testing.F) {
	builtins := os.DirFS("../profiles")
	for _, name := range []string{"_base.yaml", "tier1.yaml", "tier3.yaml", "sealed.yaml", "../mounts/testdata/override.yaml"} {
		if data, err := fs.ReadFile(builtins, name); err == nil {
			f.Add(data)
		} else if data, err := os.ReadFile(strings.TrimPrefix(name, "../")); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"extends: tier1\nfilesystem:\n  write: [\"${PWD}/out\"]\n  protect: [\"*.pem\", /abs]\n  tmpfs:\n    /tmp: {size: 1MiB, mode: \"1777\"}\nlimits:\n  wall: 90s\n  rlimits: {nofile: 1024, as: unlimited}\n",
		"extends: ./self.yaml\n",
		"extends: fuzz.yaml\nuser: \"0\"\ninner_sandbox: free\n",
		"filesystem:\n  protect_depth: 99\n  home: {private: false, size: 1T}\n",
		"&a [*a]\n",
		"limits:\n  wall: -1\n---\n",
		"seccomp:\n  default: false\n  files: [a.json]\nenvironment:\n  allow: [\"LC_*\"]\n  set: {K: V}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files := map[string][]byte{"/fuzz/fuzz.yaml": data, "/fuzz/child.yaml": []byte("extends: fuzz.yaml\n")}
		l := Loader{Builtins: builtins, ReadFile: func(name string) ([]byte, error) {
			if d, ok := files[name]; ok {
				return d, nil
			}
			return nil, fs.ErrNotExist
		}}
		for _, ref := range []string{"/fuzz/fuzz.yaml", "/fuzz/child.yaml"} {
			p, err := l.Load(ref)
			if err != nil {
				if !strings.Contains(err.Error(), "fuzz") && !errors.Is(err, ErrUnknownProfile) {
					t.Fatalf("error does not name the file: %v", err)
				}
				continue
			}
			if err := Validate(p); err != nil {
				continue
			}
			e := Expand(p, Vars{SecretHomes: []string{"/root", "/home/op"}, RunHome: "/home/agent", PWD: "/srv/proj"})
			Merge(e, p)
		}
	})
}

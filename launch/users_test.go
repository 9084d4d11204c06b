package launch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUserDBReadsFilesFirst(t *testing.T) {
	t.Parallel()
	etc := t.TempDir()
	os.WriteFile(filepath.Join(etc, "passwd"), []byte(`# comment
root:x:0:0:root:/root:/bin/bash
+nisuser::::::
agent:x:1000:1000:Agent,,,:/home/agent:/bin/bash
broken:x:notanumber:1:::
ops:x:1001:1001::/srv/ops:/bin/sh
`), 0o644)
	os.WriteFile(filepath.Join(etc, "group"), []byte(`root:x:0:
docker:x:999:agent,ops
agent:x:1000:
adm:x:4:ops,agent
`), 0o644)
	db := userDB{etc: etc}
	for spec, want := range map[string]account{
		"agent": {Name: "agent", UID: 1000, GID: 1000, Home: "/home/agent", Groups: []int{999, 4}},
		"1001":  {Name: "ops", UID: 1001, GID: 1001, Home: "/srv/ops", Groups: []int{999, 4}},
		"0":     {Name: "root", UID: 0, GID: 0, Home: "/root"},
	} {
		got, ok := db.fromFiles(spec)
		if !ok || got.Name != want.Name || got.UID != want.UID || got.GID != want.GID || got.Home != want.Home || !slices.Equal(got.Groups, want.Groups) {
			t.Errorf("fromFiles(%s) = %+v, %v; want %+v", spec, got, ok, want)
		}
	}
	for _, spec := range []string{"nobody-here", "+nisuser", "broken", "4242"} {
		if a, ok := db.fromFiles(spec); ok {
			t.Errorf("fromFiles(%s) = %+v: not in the files", spec, a)
		}
	}
	// Not in the files: NSS answers (root is in every NSS database).
	db.etc = t.TempDir()
	if a, err := db.lookup("0"); err != nil || a.Name != "root" {
		t.Errorf("NSS fallback: %+v, %v", a, err)
	}
}

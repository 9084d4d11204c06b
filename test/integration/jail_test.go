package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// project makes a workspace with the secrets tier profiles re-protect, at
// the root and one and two directories down.
func project(t *testing.T) string {
	t.Helper()
	p := workspace(t)
	files := map[string]string{"README": "hello\n"}
	for _, d := range []string{"", "sub/", "sub/deeper/"} {
		files[d+".env"] = "API_KEY=secret-" + d + "\n"
		files[d+".git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
		files[d+".git/config"] = "[core]\n\tbare = false\n"
	}
	write(t, p, files)
	return p
}

func TestWritableRootIsWritable(t *testing.T) {
	jailed(t)
	p := project(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", "echo made > out.txt && mkdir -p new/dir && echo deep > new/dir/f")
	wantCode(t, r, 0)
	data, err := os.ReadFile(filepath.Join(p, "new/dir/f"))
	if err != nil || string(data) != "deep\n" {
		t.Fatalf("write through the writable root did not land: %q, %v", data, err)
	}
	fi, _ := os.Stat(filepath.Join(p, "out.txt"))
	if uid := ownerOf(fi); uid != runUID {
		t.Errorf("out.txt is owned by %d, want the run user %d", uid, runUID)
	}
}

func TestSecretsAreReprotectedAtEveryDepth(t *testing.T) {
	jailed(t)
	p := project(t)
	before := treeHash(t, p)
	var script strings.Builder
	for _, d := range []string{".", "sub", "sub/deeper"} {
		for _, f := range []string{".env", ".git/hooks/pre-commit", ".git/config"} {
			path := d + "/" + f
			fmt.Fprintf(&script, "echo pwned >> %s && echo WROTE %s\n", path, path)
			fmt.Fprintf(&script, "rm -f %s && echo REMOVED %s\n", path, path)
			fmt.Fprintf(&script, "mv %s %s.moved && echo MOVED %s\n", path, path, path)
			fmt.Fprintf(&script, "chmod 777 %s && echo CHMOD %s\n", path, path)
		}
		fmt.Fprintf(&script, "echo new > %s/.git/hooks/post-checkout && echo PLANTED %s\n", d, d)
	}
	script.WriteString("true\n")
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", script.String())
	wantCode(t, r, 0)
	for _, word := range []string{"WROTE", "REMOVED", "MOVED", "CHMOD", "PLANTED"} {
		if strings.Contains(r.stdout, word) {
			t.Errorf("a protected path was changed inside the jail:\n%s", r.stdout)
			break
		}
	}
	if after := treeHash(t, p); after != before {
		t.Errorf("the project changed on the host (hash %s -> %s)", before, after)
	}
}

func TestMissingProtectedPathCannotBeCreated(t *testing.T) {
	jailed(t)
	p := workspace(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", `
		echo '{"mcpServers":{}}' > .mcp.json && echo CREATED .mcp.json
		mkdir -p .claude/commands && echo CREATED .claude
		git_dir=.git; mkdir -p $git_dir/hooks && echo CREATED .git
		echo x > .env && echo CREATED .env
		echo ok > allowed.txt`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "CREATED") {
		t.Errorf("a missing protected path was created:\n%s", r.stdout)
	}
	entries, _ := os.ReadDir(p)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "allowed.txt" {
		t.Errorf("the host holds %v after the run, want only allowed.txt (no placeholders left)", names)
	}
}

func TestSymlinkOutOfWritableRootCannotBeWrittenThrough(t *testing.T) {
	jailed(t)
	p := workspace(t)
	// Writable by the run user on the host and visible in the jail (not
	// under its tmpfs /tmp), but not a writable root.
	outside := visibleDir(t)
	write(t, outside, map[string]string{"victim": "original\n"})
	if err := os.Symlink(outside, filepath.Join(p, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "victim"), filepath.Join(p, "victim-link")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, outside)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c",
		"echo pwned > escape/victim; echo pwned > victim-link; echo new > escape/new; true")
	wantCode(t, r, 0)
	if after := treeHash(t, outside); after != before {
		t.Errorf("a symlink let the agent write outside its writable root")
	}
	if !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("writes were not refused as read-only:\n%s", r.stderr)
	}
}

func TestSystemDirectoriesAreReadOnly(t *testing.T) {
	jailed(t)
	r := aj(t, "run", "--", "sh", "-c", "for d in /etc /usr /usr/bin /var/lib /; do touch $d/agentjail-probe 2>/dev/null && echo WROTE $d; done; true")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("system directories are writable:\n%s", r.stdout)
	}
	for _, d := range []string{"/etc", "/usr", "/usr/bin", "/var/lib", "/"} {
		if _, err := os.Lstat(filepath.Join(d, "agentjail-probe")); err == nil {
			t.Errorf("%s/agentjail-probe exists on the host", d)
		}
	}
}

func TestTmpIsCappedAndPrivate(t *testing.T) {
	jailed(t)
	dir := workspace(t)
	profile := filepath.Join(dir, "small-tmp.yaml")
	write(t, dir, map[string]string{"small-tmp.yaml": "extends: tier1\nfilesystem:\n  tmpfs:\n    /tmp: {size: 1MiB, mode: \"1777\"}\n"})
	marker := fmt.Sprintf("agentjail-it-big-%d", time.Now().UnixNano())
	r := aj(t, "run", "--profile", profile, "--", "sh", "-c",
		"dd if=/dev/zero of=/tmp/"+marker+" bs=64k count=64 2>&1; echo dd=$?")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "No space left on device") || strings.Contains(r.stdout, "dd=0") {
		t.Errorf("writing 4 MiB into a 1 MiB /tmp did not fail with ENOSPC:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join("/tmp", marker)); err == nil {
		t.Errorf("the jail's /tmp write reached the host")
	}
}

func TestHomeSecretsAreHidden(t *testing.T) {
	jailed(t)
	// The invoking user's home ($HOME) holds credentials tier1 denies.
	home := workspace(t)
	write(t, home, map[string]string{
		".ssh/id_ed25519":  "PRIVATE KEY\n",
		".aws/credentials": "aws_secret_access_key=x\n",
		".kube/config":     "token: x\n",
		".gnupg/x":         "x\n",
	})
	inv := invocation{env: []string{"HOME=" + home}}
	r := inv.run(t, "run", "--", "sh", "-c", fmt.Sprintf(`
		for f in .ssh/id_ed25519 .aws/credentials .kube/config .gnupg/x; do
			cat %[1]s/$f 2>/dev/null && echo "READ $f"
		done
		ls -A %[1]s/.ssh | grep . && echo "LISTED .ssh"
		true`, home))
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "READ") || strings.Contains(r.stdout, "LISTED") {
		t.Errorf("home secrets are visible in the jail:\n%s", r.stdout)
	}
	// The agent's own home is private and writable.
	r = aj(t, "run", "--", "sh", "-c", `echo x > "$HOME/f" && test "$(stat -c %u "$HOME")" = "$(id -u)" && echo HOME-OK`)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "HOME-OK") {
		t.Errorf("the private home is not writable by the agent:\n%s%s", r.stdout, r.stderr)
	}
}

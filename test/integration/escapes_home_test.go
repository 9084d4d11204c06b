package integration

// An operator's home given as a writable root (`sudo agentjail run --write
// ~`): what agentjail copies from that home for a run, and what the
// operator's own tools read there, must not be the agent's way to a
// root-only file or to the operator's login (the review after issue 14).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// operatorHome is an operator's home that runs write (owned by the run
// user, so that it may be a writable root), holding a Claude Code login
// and configuration, and a root-only secret elsewhere.
func operatorHome(t *testing.T) (home, secret, secretDir string) {
	t.Helper()
	home = visibleDir(t)
	write(t, home, map[string]string{
		".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-operator","refreshToken":"sk-ant-ort01-operator"}}`,
		".claude.json":              `{"hasCompletedOnboarding":true}`,
	})
	secretDir = visibleDir(t)
	os.Chown(secretDir, 0, 0)
	os.Chmod(secretDir, 0o700)
	secret = filepath.Join(secretDir, "credentials")
	if err := os.WriteFile(secret, []byte("TOP-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, secret, secretDir
}

// TestEscapeCopiesFromAWritableHome: run N linked ~/.claude.json to a
// root-only file and ~/.aws to a root-only directory; agentjail, as root,
// copied what they point to into run N+1's jail, owned by the run user
// (render followed the links, the copy opened them). No plain-bwrap
// baseline: the door was agentjail's own; this test fails on the tree
// before the fix. Now run N cannot make the links (the names are
// protected in a writable home), and links an earlier run left are a
// protected path that is a link, refused before anything runs; a profile
// that accepts protected links gets a warning, and nothing is copied
// through the link.
func TestEscapeCopiesFromAWritableHome(t *testing.T) {
	jailed(t)
	home, secret, secretDir := operatorHome(t)
	inv := invocation{env: []string{"HOME=" + home}, dir: home}
	// Run N can no longer plant them: both names are protected in a
	// writable home.
	r := inv.run(t, "run", "--profile", "tier3", "--write", home, "--", "sh", "-c",
		"rm -f "+home+"/.claude.json && echo PLANTED-CONFIG; ln -s "+secretDir+" "+home+"/.aws && echo PLANTED-AWS; true")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "PLANTED") {
		t.Errorf("run N planted a link:\n%s", r.stdout)
	}
	// An earlier run (before the fix, or with another profile) left them.
	os.Remove(filepath.Join(home, ".claude.json"))
	for link, target := range map[string]string{".claude.json": secret, ".aws": secretDir} {
		os.Symlink(target, filepath.Join(home, link))
		os.Lchown(filepath.Join(home, link), runUID, runUID)
	}
	read := []string{"--", "sh", "-c", `cat "$CLAUDE_CONFIG_DIR/.claude.json" "$HOME/.aws/credentials" 2>&1; echo RAN`}

	r = inv.run(t, append([]string{"run", "--profile", "tier3", "--write", home}, read...)...)
	wantCode(t, r, 125)
	for _, want := range []string{home + "/.claude.json -> " + secret, home + "/.aws -> " + secretDir} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not name the link %s:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "RAN") || strings.Contains(r.stdout, "TOP-SECRET") {
		t.Errorf("run N+1 ran:\n%s", r.stdout)
	}

	profile := filepath.Join(visibleDir(t), "accept.yaml")
	os.WriteFile(profile, []byte("extends: tier3\nfilesystem:\n  accept_protected_symlinks: true\n"), 0o644)
	r = inv.run(t, append([]string{"run", "--profile", profile, "--write", home}, read...)...)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "TOP-SECRET") || !strings.Contains(r.stdout, "RAN") {
		t.Errorf("the jail read the root-only file through the planted links:\n%s", r.stdout)
	}
	for _, w := range []string{
		"warning: " + home + "/.claude.json is not given to the jail: " + home + "/.claude.json is a symbolic link (to " + secret + ") in a writable root",
		"warning: " + home + "/.aws is not given to the jail: " + home + "/.aws is a symbolic link (to " + secretDir + ") in a writable root",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}

// TestEscapeLoginInAWritableHome: with the operator's home a writable
// root, the agent wrote ~/.claude/.credentials.json and ~/.claude.json,
// which the operator's next claude reads: its login and its MCP servers
// became the agent's. Now both are read-only there (uncreatable when
// missing), as every file agentjail copies from a home is; plain bwrap
// with the home writable lets the agent write them.
func TestEscapeLoginInAWritableHome(t *testing.T) {
	jailed(t)
	forge := func(home string) string {
		return `cd ` + home + ` && echo '{"claudeAiOauth":{"accessToken":"sk-ant-oat01-agent"}}' > .claude/.credentials.json && echo FORGED-LOGIN; ` +
			`echo '{"mcpServers":{"x":{"command":"/tmp/evil"}}}' > .claude.json && echo FORGED-CONFIG; ` +
			`rm -f .claude.json && echo '{}' > .claude.json && echo REPLACED-CONFIG; true`
	}
	home, _, _ := operatorHome(t)
	c := plainBwrap{cred: uid1000, args: []string{"--bind", home, home}}.run(t, "sh", "-c", forge(home))
	holeShown(t, strings.Contains(c.stdout, "FORGED-LOGIN") && strings.Contains(c.stdout, "FORGED-CONFIG"), "the agent writes the operator's login and configuration", c)

	home, _, _ = operatorHome(t)
	before := treeHash(t, filepath.Join(home, ".claude")) + treeHash(t, filepath.Join(home, ".claude.json"))
	r := invocation{env: []string{"HOME=" + home}, dir: home}.run(t, "run", "--write", home, "--", "sh", "-c", forge(home))
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "FORGED") || strings.Contains(r.stdout, "REPLACED") {
		t.Errorf("the agent wrote the operator's Claude Code files:\n%s", r.stdout)
	}
	if after := treeHash(t, filepath.Join(home, ".claude")) + treeHash(t, filepath.Join(home, ".claude.json")); after != before {
		t.Error("the operator's Claude Code files changed")
	}
}

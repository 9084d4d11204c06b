package integration

// The filesystem items of the escapes suite (see escapes_test.go).

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentjail/agentjail/hostfs"
	"golang.org/x/sys/unix"
)

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

// TestEscapeMissingProtectedPaths: to keep a missing protected path from
// being created, bwrap needs a mount point, and leaves it on the host (a
// 0-byte file). agentjail removes what it had bwrap create, on every exit
// path; a run killed with SIGKILL leaves it, and the next run removes it,
// whatever its writable roots. The removal never follows a symlink.
func TestEscapeMissingProtectedPaths(t *testing.T) {
	jailed(t)
	p := workspace(t)
	mcp := filepath.Join(p, ".mcp.json")
	c := plainBwrap{args: []string{"--bind", p, p, "--ro-bind", "/dev/null", mcp}}.run(t, "sh", "-c", "echo '{}' > "+mcp+" || true")
	holeShown(t, fileExists(mcp), "a 0-byte .mcp.json placeholder is left on the host", c)

	for _, c := range []struct {
		name  string
		flags []string
		argv  []string
		code  int
		left  string
	}{
		{"exit", nil, []string{"sh", "-c", "echo '{}' > .mcp.json; mkdir -p .claude/commands; touch made"}, 0, "made"},
		{"failing agent", nil, []string{"sh", "-c", "touch made; exit 3"}, 3, "made"},
		{"agent killed by a signal", nil, []string{"sh", "-c", "touch made; kill -KILL $$"}, 128 + 9, "made"},
		{"exec failure", nil, []string{"./no-such-command"}, 127, ""},
		{"timeout", []string{"--timeout", "1s", "--grace", "0"}, []string{"sh", "-c", "touch made; exec sleep 60"}, 124, "made"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := workspace(t)
			r := aj(t, append(append(append([]string{"run", "--write", p, "--chdir", p}, c.flags...), "--"), c.argv...)...)
			wantCode(t, r, c.code)
			if got := entries(t, p); got != c.left {
				t.Errorf("the host holds %q after the run, want %q (no placeholders)", got, c.left)
			}
		})
	}

	t.Run("agentjail killed, the next run cleans up", func(t *testing.T) {
		t.Parallel()
		p := workspace(t)
		cmd := exec.Command(agentjail, "run", "--write", p, "--chdir", p, "--", "sh", "-c", "touch ready; exec sleep 60")
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return fileExists(filepath.Join(p, "ready")) })
		if fi, err := os.Lstat(filepath.Join(p, ".mcp.json")); err != nil || fi.Size() != 0 {
			t.Fatalf("no placeholder while the run is live: %v", err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		// Another test's run may already have swept it; either way the
		// next run leaves none.
		wantCode(t, aj(t, "run", "--", "true"), 0)
		if got := entries(t, p); got != "ready" {
			t.Errorf("after the next run the host holds %q, want only ready", got)
		}
	})

	// A protected path deep in the tree, missing: its parents are pinned,
	// so the agent cannot swap one for a link to elsewhere; and had it
	// done so, the removal would not follow the link (the empty file
	// there is someone else's).
	t.Run("no symlink is followed", func(t *testing.T) {
		t.Parallel()
		p, outside := workspace(t), visibleDir(t)
		write(t, p, map[string]string{"a/b/": ""})
		write(t, outside, map[string]string{"b/.env": ""})
		profile := filepath.Join(outside, "deep.yaml")
		os.WriteFile(profile, []byte(fmt.Sprintf("extends: tier1\nfilesystem:\n  protect: [%s/a/b/.env]\n", p)), 0o644)
		r := aj(t, "run", "--profile", profile, "--write", p, "--chdir", p, "--", "sh", "-c",
			"mv a a.aside && ln -s "+outside+" a && echo SWAPPED; true")
		wantCode(t, r, 0)
		if strings.Contains(r.stdout, "SWAPPED") {
			t.Errorf("a parent of a protected path was swapped for a link")
		}
		if !fileExists(filepath.Join(outside, "b/.env")) {
			t.Error("the cleanup removed a file through a symlink")
		}
		if got := entries(t, filepath.Join(p, "a/b")); got != "" {
			t.Errorf("a/b holds %q after the run", got)
		}
	})
}

// TestEscapeRenameParent: with proj/.git/hooks and proj/sub/.git/hooks
// read-only, moving .git, sub or a directory above a nested repository
// aside and making a new one gives the agent writable hooks, which run on
// the host at the next git command. Every directory between the writable
// root and a protected path is pinned (a mount point cannot be renamed),
// also the project's own above a nested repository; what the agent still
// makes (a new repository) is found after the run and moved aside (its
// .git renamed, so that git does not use it): reason violation, exit 123,
// listed.
func TestEscapeRenameParent(t *testing.T) {
	jailed(t)
	repo := map[string]string{}
	for _, d := range []string{"", "sub/", "deep/er/"} {
		repo[d+".git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
		repo[d+".git/config"] = "[core]\n"
	}
	repo["other/"] = ""
	script := `mv .git .git.aside && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && echo PLANTED-ROOT
mv sub sub.aside && mkdir -p sub/.git/hooks && echo evil > sub/.git/hooks/pre-commit && echo PLANTED-SUB
mv deep deep.aside && mkdir -p deep/er/.git/hooks && echo evil > deep/er/.git/hooks/pre-commit && echo PLANTED-DEEP
mkdir -p other/.git/hooks && echo evil > other/.git/hooks/post-checkout && echo PLANTED-NEW
true`
	binds := func(p string) []string {
		args := []string{"--bind", p, p, "--chdir", p}
		for _, d := range []string{"", "sub/", "deep/er/"} {
			for _, f := range []string{".git/hooks", ".git/config"} {
				args = append(args, "--ro-bind", filepath.Join(p, d, f), filepath.Join(p, d, f))
			}
		}
		return args
	}

	p := workspace(t)
	write(t, p, repo)
	c := plainBwrap{cred: uid1000, args: binds(p)}.run(t, "sh", "-c", script)
	planted := true
	for _, d := range []string{"", "sub/", "deep/er/"} {
		data, _ := os.ReadFile(filepath.Join(p, d, ".git/hooks/pre-commit"))
		planted = planted && string(data) == "evil\n"
	}
	holeShown(t, planted, "writable hooks after moving .git, sub or deep aside", c)

	p = workspace(t)
	write(t, p, repo)
	before := map[string]string{}
	for _, d := range []string{".git", "sub", "deep"} {
		before[d] = treeHash(t, filepath.Join(p, d))
	}
	rec := filepath.Join(t.TempDir(), "record.json")
	r := aj(t, "run", "--write", p, "--chdir", p, "--record", rec, "--", "sh", "-c", script)
	wantCode(t, r, 123)
	for d, h := range before {
		if treeHash(t, filepath.Join(p, d)) != h || fileExists(filepath.Join(p, d+".aside")) {
			t.Errorf("%s was moved aside or changed", d)
		}
	}
	if strings.Contains(r.stdout, "PLANTED-ROOT") || strings.Contains(r.stdout, "PLANTED-SUB") || strings.Contains(r.stdout, "PLANTED-DEEP") || !strings.Contains(r.stdout, "PLANTED-NEW") {
		t.Errorf("a pinned directory was moved aside, or the new repository could not be made (the test proves nothing):\n%s", r.stdout)
	}
	got := readRecord(t, rec, 123)
	if got.Reason != "violation" {
		t.Errorf("reason %s, want violation", got.Reason)
	}
	var listed []string
	for _, v := range got.Violations {
		if v.What != "protected" {
			t.Errorf("violation %+v", v)
		}
		listed = append(listed, v.Detail)
	}
	aside := filepath.Join(p, "other/.git.agentjail-quarantine-"+got.RunID)
	want := filepath.Join(p, "other/.git") + " appeared during the run: git takes it for a git directory (.git); moved aside to " + aside
	if len(listed) != 1 || !strings.Contains(listed[0], want) {
		t.Errorf("violations %q, want one: %q", listed, want)
	}
	if !strings.Contains(r.stderr, "agentjail: violation: "+want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	// The new repository is moved aside, so that git does not use it, and
	// kept whole for the operator to review.
	if data, _ := os.ReadFile(filepath.Join(aside, "hooks/post-checkout")); string(data) != "evil\n" || fileExists(filepath.Join(p, "other/.git")) {
		t.Errorf("other/.git was not moved aside whole: %q", data)
	}
}

// TestEscapeSymlinkedWritableRoots: a writable root whose path is, or
// passes through, a symlink (left by an earlier run, say) binds wherever
// the link points. agentjail refuses it, naming the given and the
// canonical path; and nothing in a workspace widens the policy.
func TestEscapeSymlinkedWritableRoots(t *testing.T) {
	jailed(t)
	ws, outside := workspace(t), visibleDir(t)
	write(t, outside, map[string]string{"victim": "original\n", "sub/": ""})
	relOutside, err := filepath.Rel(ws, outside)
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": outside, "rel": relOutside, "mid": outside} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := treeHash(t, outside)
	c := plainBwrap{cred: uid1000, args: []string{"--bind", filepath.Join(ws, "rel"), filepath.Join(ws, "rel")}}.run(t, "sh", "-c", "echo pwned > "+filepath.Join(ws, "rel/victim"))
	holeShown(t, treeHash(t, outside) != before, "a write through a linked writable root lands outside it", c)
	write(t, outside, map[string]string{"victim": "original\n"})
	before = treeHash(t, outside)

	for _, c := range []struct {
		name, write, canonical string
		inv                    invocation
	}{
		{"absolute link", filepath.Join(ws, "abs"), outside, invocation{}},
		{"relative link", filepath.Join(ws, "rel"), outside, invocation{}},
		{"link in a middle component", filepath.Join(ws, "mid/sub"), filepath.Join(outside, "sub"), invocation{}},
		{"relative --write through a link", "rel", outside, invocation{dir: ws}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(c.canonical, "ran")
			r := c.inv.run(t, "run", "--write", c.write, "--", "sh", "-c", "echo pwned > "+filepath.Join(c.canonical, "victim")+"; touch "+marker)
			wantCode(t, r, 125)
			given := c.write
			if !filepath.IsAbs(given) {
				given = filepath.Join(c.inv.dir, given)
			}
			want := fmt.Sprintf("writable root %s passes through a symlink and is really %s; pass the canonical path %s", given, c.canonical, c.canonical)
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
			if fileExists(marker) {
				t.Error("the command ran")
			}
		})
	}
	if treeHash(t, outside) != before {
		t.Error("something was written outside through a link")
	}

	// Files a workspace might hold to look like configuration change
	// nothing: agentjail reads a profile only from --profile.
	t.Run("workspace files do not widen the policy", func(t *testing.T) {
		t.Parallel()
		p := workspace(t)
		render := func() string {
			r := invocation{dir: p}.run(t, "render", "--json", "--write", p, "--", "true")
			wantCode(t, r, 0)
			return r.stdout
		}
		clean := render()
		wide := "extends: tier3\ninner_sandbox: free\nfilesystem:\n  write: [/]\n  protect_depth: 0\nseccomp:\n  default: false\n"
		write(t, p, map[string]string{
			"agentjail.yaml": wide, ".agentjail.yaml": wide, ".agentjail/profile.yaml": wide, ".agentjail/config.yaml": wide,
		})
		if got := render(); got != clean {
			t.Errorf("files in the workspace changed the jail:\n%s\nwas:\n%s", got, clean)
		}
		// A worktree's .git file is read (its hooks and config are
		// protected), but a target outside the writable roots adds nothing.
		write(t, p, map[string]string{".git": "gitdir: /etc\n"})
		if got := render(); strings.Contains(got, `"/etc/`) {
			t.Errorf("a .git file pointing at /etc changed what the jail binds:\n%s", got)
		}
	})
}

// TestEscapeSetIDAndDeviceFiles: files made in a writable root keep their
// set-id bits and device numbers on the host, where nosuid and nodev do not
// apply; plain bwrap as root leaves a set-user-id root binary and a device
// node there. In agentjail, chmod u+s is refused (the seccomp filter);
// what the filter cannot see (openat2's mode) and set-group-id bits are
// stripped after the run, device nodes removed (none can be made without
// CAP_MKNOD), each listed in violations (reason violation, exit 123). A
// set-id file that was there before the run is inert inside (nosuid) and
// left alone on the host.
func TestEscapeSetIDAndDeviceFiles(t *testing.T) {
	jailed(t)
	e := newSeccompEnv(t)
	script := func(p string) string {
		return fmt.Sprintf(`cd %[1]s
cp /bin/true uid && chmod 4755 uid && echo CHMOD-UID
cp /bin/true gid && chmod 2755 gid
%[2]s openat2-setuid=%[1]s/o2
mknod nul c 1 3 && echo MKNOD
./preexisting -u
true`, p, e.probe)
	}
	prepare := func(owner int) string {
		p := workspace(t)
		chownR(t, p, owner) // a capless root writes only what root owns
		id, err := os.ReadFile("/usr/bin/id")
		if err != nil {
			t.Fatal(err)
		}
		pre := filepath.Join(p, "preexisting")
		os.WriteFile(pre, id, 0o755)
		os.Chmod(pre, 0o755|os.ModeSetuid) // root's, set-user-id
		// Before the run means changed before the coarse clock agentjail
		// reads at launch (hostfs.RunClock). Since Linux 6.13 a change
		// time can come from the fine clock (multigrain timestamps, which
		// ext4 and tmpfs use), ahead of the coarse one by a tick and more
		// on a loaded machine (measured: 10 ms): wait until that clock is
		// past the file's change time, as it is for any file older than
		// the run by that much.
		var st unix.Stat_t
		if err := unix.Stat(pre, &st); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			now := hostfs.RunClock()
			if st.Ctim.Nsec == 0 { // a file system of whole seconds
				return now.Sec > st.Ctim.Sec
			}
			return now.Sec > st.Ctim.Sec || now.Sec == st.Ctim.Sec && now.Nsec > st.Ctim.Nsec
		})
		return p
	}
	setID := func(p string) []string {
		var out []string
		filepath.Walk(p, func(path string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 && fi.Mode().IsRegular() {
				out = append(out, filepath.Base(path))
			}
			if err == nil && fi.Mode()&os.ModeDevice != 0 {
				out = append(out, "device:"+filepath.Base(path))
			}
			return nil
		})
		return out
	}

	p := prepare(runUID)
	c := plainBwrap{args: []string{"--bind", p, p}}.run(t, "sh", "-c", script(p))
	left := setID(p)
	holeShown(t, slicesContains(left, "uid") && slicesContains(left, "device:nul"), "a set-user-id root file and a device node stay on the host", c)

	for _, c := range []struct {
		args  []string
		owner int
	}{{[]string{"--profile", "tier1"}, runUID}, {[]string{"--profile", "sealed", "--user", "root"}, 0}} {
		args := c.args
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			p := prepare(c.owner)
			rec := filepath.Join(t.TempDir(), "record.json")
			r := aj(t, append(append([]string{"run", "--write", p, "--chdir", p, "--record", rec}, args...), "--", "sh", "-c", script(p))...)
			wantCode(t, r, 123)
			if strings.Contains(r.stdout, "CHMOD-UID") || strings.Contains(r.stdout, "MKNOD") {
				t.Errorf("chmod u+s or mknod succeeded in the jail:\n%s", r.stdout)
			}
			if args[1] == "tier1" && !strings.Contains(r.stdout, "\n1000\n") {
				t.Errorf("a set-user-id root binary did not run as the agent (nosuid):\n%s", r.stdout)
			}
			if got := setID(p); strings.Join(got, ",") != "preexisting" {
				t.Errorf("set-id or device files left on the host: %v (want only the pre-existing one)", got)
			}
			got := readRecord(t, rec, 123)
			var stripped []string
			for _, v := range got.Violations {
				if v.What == "setid" {
					stripped = append(stripped, filepath.Base(strings.SplitN(v.Detail, ":", 2)[0]))
				}
			}
			if got.Reason != "violation" || strings.Join(stripped, ",") != "gid,o2" {
				t.Errorf("reason %s, set-id violations %v, want gid and o2; the record's violations: %+v", got.Reason, stripped, got.Violations)
			}
		})
	}
}

// TestEscapeTooDeepForTheCheck: the walk after the run holds a descriptor
// per level; an agent that nests directories past agentjail's descriptor
// limit left what lay below unchecked (a set-group-id file, a new .git),
// and the run ended clean. What the walk cannot reach is a violation now.
func TestEscapeTooDeepForTheCheck(t *testing.T) {
	jailed(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux): %v", err)
	}
	p := workspace(t)
	r := invocation{dir: p, wrap: []string{prlimit, "--nofile=400:400"}}.run(t, "run", "--net", "none", "--write", p, "--chdir", p, "--",
		"python3", "-c", `import os
for i in range(600): os.mkdir("a"); os.chdir("a")
open("evil", "w").write("x"); os.chmod("evil", 0o2755); os.mkdir(".git")`)
	wantCode(t, r, 123)
	var unchecked string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "what lies there was not checked") {
			unchecked = l
		}
	}
	if !strings.Contains(unchecked, "too many open files") || len(unchecked) > 700 || !strings.Contains(r.stderr, "1 unchecked") {
		t.Errorf("stderr (%d bytes):\n%.3000s", len(r.stderr), r.stderr)
	}
}

// TestEscapeConcurrentRuns: two runs share a writable root that lacks a
// protected path. The one that ends first must not remove the placeholder
// the other still relies on (the other could then create the path), and
// the last one out removes it; neither reports the other's placeholder as
// a violation. Plain bwrap leaves the placeholder behind.
func TestEscapeConcurrentRuns(t *testing.T) {
	jailed(t)
	p := workspace(t)
	mcp := filepath.Join(p, ".mcp.json")
	c := plainBwrap{args: []string{"--bind", p, p, "--ro-bind", "/dev/null", mcp}}.run(t, "true")
	holeShown(t, fileExists(mcp), "the placeholder outlives the run", c)

	p = workspace(t)
	mcp = filepath.Join(p, ".mcp.json")
	long := exec.Command(agentjail, "run", "--write", p, "--chdir", p, "--", "sh", "-c",
		`touch ready; while [ ! -e go ]; do sleep 0.05; done; echo '{}' > .mcp.json && echo CREATED; true`)
	long.Dir, long.Env = "/", []string{"PATH=/usr/bin:/bin"}
	var out, errOut bytes.Buffer
	long.Stdout, long.Stderr = &out, &errOut
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	defer long.Process.Kill()
	waitFor(t, func() bool { return fileExists(filepath.Join(p, "ready")) })
	short := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", "echo '{}' > .mcp.json && echo CREATED; true")
	wantCode(t, short, 0)
	if strings.Contains(short.stdout, "CREATED") {
		t.Error("the second run created the protected path")
	}
	if fi, err := os.Lstat(mcp); err != nil || fi.Size() != 0 {
		t.Fatalf("the first run's placeholder is gone while it runs: %v", err)
	}
	os.WriteFile(filepath.Join(p, "go"), nil, 0o644)
	err := long.Wait()
	if err != nil || strings.Contains(out.String(), "CREATED") {
		t.Errorf("the first run: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	if fileExists(mcp) {
		t.Error("the last run out left the placeholder")
	}
}

// TestEscapeInputFilesInAWritableRoot: a profile in a writable root
// (`--profile ./agentjail.yaml --write .`), the profile it extends, or a
// seccomp file there, was the agent's to edit: run N widened what run N+1
// loads (another writable root, no seccomp rule). Now every input file in a
// writable root is read-only for the run, with one warning.
func TestEscapeInputFilesInAWritableRoot(t *testing.T) {
	jailed(t)
	files := map[string]string{
		"agentjail.yaml": "extends: ./parent.yaml\nseccomp:\n  files: [SECCOMP]\n",
		"parent.yaml":    "extends: tier1\n",
		"seccomp.json":   `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}`,
	}
	setup := func() string {
		p := workspace(t)
		for name, data := range files {
			write(t, p, map[string]string{name: strings.ReplaceAll(data, "SECCOMP", filepath.Join(p, "seccomp.json"))})
		}
		return p
	}
	edit := `for f in agentjail.yaml parent.yaml seccomp.json; do echo '# edited' >> $f && echo EDITED $f; done; true`

	p := setup()
	before := treeHash(t, p)
	c := plainBwrap{cred: uid1000, args: []string{"--bind", p, p, "--chdir", p}}.run(t, "sh", "-c", edit)
	holeShown(t, treeHash(t, p) != before, "the agent edits the profiles and the seccomp file", c)

	p = setup()
	before = treeHash(t, p)
	r := aj(t, "run", "--profile", filepath.Join(p, "agentjail.yaml"), "--write", p, "--chdir", p, "--", "sh", "-c", edit)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "EDITED") || treeHash(t, p) != before {
		t.Errorf("the agent edited an input file:\n%s", r.stdout)
	}
	want := "agentjail: warning: " + filepath.Join(p, "agentjail.yaml") + ", " + filepath.Join(p, "parent.yaml") + ", " + filepath.Join(p, "seccomp.json") +
		": in a writable root, kept read-only for this run so that the agent cannot edit what the next run loads"
	if strings.Count(r.stderr, "kept read-only for this run") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks one warning %q:\n%s", want, r.stderr)
	}
}

// TestEscapeTerminalThroughOwnLines: agentjail says on the operator's
// terminal what the jail made: a file name in a violation, a link and its
// target in the next run's refusal. They were printed as they were: an
// OSC 52 in a name wrote the operator's clipboard, a newline made a line
// that read as agentjail's own, and the refusal's fix command carried the
// target unquoted, to be pasted. Now every such line is escaped, and a
// fix command names nothing with a control character in it.
func TestEscapeTerminalThroughOwnLines(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	const hostile = "x\x1b]52;c;cHduZWQK\x07\nagentjail: all good"
	r := aj(t, "run", "--user", "1000", "--write", ws, "--chdir", ws, "--", "/usr/bin/python3", "-c",
		fmt.Sprintf(`import os; open(".env." + %q, "w").close(); os.makedirs("sub"); os.symlink(%q + ";touch pwned", "sub/.env")`, hostile, hostile))
	wantCode(t, r, 123)
	clean := func(stderr string) {
		t.Helper()
		if strings.ContainsAny(stderr, "\x1b\x07") || strings.Contains(stderr, "\nagentjail: all good") {
			t.Errorf("stderr carries the jail's control characters:\n%q", stderr)
		}
	}
	clean(r.stderr)
	if !strings.Contains(r.stderr, `agentjail: violation: `+ws+`/.env.x\x1b]52;c;cHduZWQK\x07\x0aagentjail: all good appeared`) {
		t.Errorf("no escaped violation line:\n%s", r.stderr)
	}
	r = aj(t, "run", "--user", "1000", "--write", ws, "--", "true")
	wantCode(t, r, 125)
	clean(r.stderr)
	if !strings.Contains(r.stderr, `sub/.env -> "`+ws+`/sub/x\x1b]52;c;cHduZWQK\a\nagentjail: all good;touch pwned": a mount cannot cover a link`) ||
		!strings.Contains(r.stderr, "remove the link, whose name or target holds control characters") || strings.Contains(r.stderr, "cp -a") {
		t.Errorf("the refusal does not quote the link's target, or offers a command with it:\n%s", r.stderr)
	}
}

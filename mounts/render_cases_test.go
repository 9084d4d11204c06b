package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/policy"
)

func TestRenderRefusesBadWritableRoots(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, root, want string
	}{
		{"missing", "/srv/nope", "--write: filesystem.write[0]: writable root /srv/nope does not exist; create it first (mkdir -p /srv/nope)"},
		{"not writable", "/srv/rootonly", "writable root /srv/rootonly is not writable by the run user agent (uid 1000); fix with `chown -R 1000:1000 /srv/rootonly`, or choose the owner with --user"},
		{"symlink", "/srv/link-to-proj", "writable root /srv/link-to-proj passes through a symlink and is really /srv/proj; pass the canonical path /srv/proj"},
		{"inside deny", "/home/op/.aws", "writable root /home/op/.aws is the denied path /home/op/.aws; choose another directory: the denial is the built-in profile's (profiles/_no-credentials.yaml:"},
		{"the root", "/", "writable root / is a system directory; a writable root is a project's own directory"},
		{"a system directory", "/etc", "writable root /etc is a system directory"},
		{"in the kernel's", "/proc/self", "writable root /proc/self is a system directory"},
		{"in a system tree", "/etc/app", "writable root /etc/app is not writable by the run user agent (uid 1000); pass --user with a user who may write it (not root: agents do not run as root), or give a directory of the run user's own"},
		{"a file", "/etc/passwd", "--write: filesystem.write[0]: writable root /etc/passwd is not a directory; a writable root is a directory: give the one that holds it (/etc), or bind the file read-only with read:"},
		{"a newline in the path", "/srv/a\nb", `--write: filesystem.write[0]: writable root "/srv/a\nb" does not exist; create it first (mkdir -p "/srv/a\nb") or remove it`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := input(t, "tier1", c.root)
			_, err := Render(in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Render = %v\nwant %q", err, c.want)
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Errorf("error is not policy.ErrInvalid: %v", err)
			}
		})
	}
}

// TestRenderRootOwnedRootForNobody: a root-owned directory makes nobody the
// run user; the fix offered is a normal user's, not a chown to nobody nor
// --user root (refused outside a sealed profile).
func TestRenderRootOwnedRootForNobody(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/rootonly")
	in.User = User{UID: 65534, GID: 65534, Name: "nobody", Home: "/nonexistent", Why: "the owner of /srv/rootonly is root"}
	_, err := Render(in)
	want := "writable root /srv/rootonly is owned by root, so the agent runs as nobody, who cannot write it (agents do not run as root): give it to the user the agent should run as (`chown -R USER: /srv/rootonly`) and pass --user USER, or work in a directory a normal user owns"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "65534:65534") {
		t.Errorf("Render = %v\nwant %q", err, want)
	}
	// /var/tmp is no system tree of the kind that must not be chowned.
	in = input(t, "tier1", "/var/tmp/proj")
	in.Disk.(fstest.MapFS)["var/tmp"] = dir(0o1777, 0)
	in.Disk.(fstest.MapFS)["var/tmp/proj"] = dir(0o755, 0)
	in.User = User{UID: 65534, GID: 65534, Name: "nobody", Home: "/nonexistent", Why: "the owner of /var/tmp/proj is root"}
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "writable root /var/tmp/proj is owned by root, so the agent runs as nobody") {
		t.Errorf("in /var/tmp: Render = %v", err)
	}
}

// TestRenderRootNotWritableByTheOperator: without root the agent runs as
// the operator, who can neither choose another user nor chown another's
// directory: the fix says what they can do.
func TestRenderRootNotWritableByTheOperator(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/rootonly")
	in.User = User{UID: 1000, GID: 1000, Name: "agent", Home: "/home/agent", Why: policy.WhyInvoker}
	_, err := Render(in)
	want := "writable root /srv/rootonly is not writable by you (agent, uid 1000), as whom the agent runs: give a directory of your own, or have its owner let you write it"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "--user") || strings.Contains(err.Error(), "chown") {
		t.Errorf("Render = %v\nwant %q", err, want)
	}
}

func TestRenderRefusesRootAgentOutsideSealed(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	in.User = User{UID: 0, GID: 0, Name: "root", Home: "/root"}
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "uid 0, allowed only with inner_sandbox: sealed") {
		t.Fatalf("Render = %v", err)
	}
	// A capless root writes only what root owns: the project is the
	// agent's (uid 1000).
	in = input(t, "sealed", "/srv/proj")
	in.User = User{UID: 0, GID: 0, Name: "root", Home: "/root"}
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "writable root /srv/proj is not writable by the run user root (uid 0); fix with `chown -R 0:0 /srv/proj`") {
		t.Fatalf("sealed root on a project it does not own: Render = %v", err)
	}
	in = input(t, "sealed", "/srv/rootonly")
	in.User = User{UID: 0, GID: 0, Name: "root", Home: "/root"}
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	for _, want := range []string{"--unshare-user --disable-userns --uid 0 --gid 0 --cap-drop ALL", "--ro-bind /proc/sys /proc/sys", "--ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger"} {
		if !strings.Contains(args, want) {
			t.Errorf("sealed root plan lacks %q:\n%s", want, args)
		}
	}
}

func TestRenderChdirHidden(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1")
	in.Chdir = "/tmp/work"
	in.Disk.(fstest.MapFS)["tmp/work"] = dir(0o755, 1000)
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "start directory /tmp/work is not visible in the jail: the tmpfs at /tmp hides it") {
		t.Fatalf("Render = %v", err)
	}
	in = input(t, "tier1", "/tmp/work")
	in.Chdir = "/tmp/work"
	in.Disk.(fstest.MapFS)["tmp/work"] = dir(0o755, 1000)
	if _, err := Render(in); err != nil {
		t.Fatalf("a writable root under /tmp is visible: %v", err)
	}
}

func TestRenderMinimalBase(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1")
	in.Policy.Filesystem.Base = policy.BaseMinimal
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	for _, want := range []string{"--ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --ro-bind /etc /etc --proc /proc", "--remount-ro / --chdir"} {
		if !strings.Contains(args, want) {
			t.Errorf("minimal plan lacks %q:\n%s", want, args)
		}
	}
	if strings.Contains(args, "--ro-bind / /") {
		t.Error("minimal base binds the host root")
	}
}

func TestRenderNeverLeaksFlagsForUnsealedProfiles(t *testing.T) {
	t.Parallel()
	for _, profile := range []string{"tier1", "tier2", "tier3"} {
		plan, err := Render(input(t, profile, "/srv/proj"))
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"--unshare-user", "--disable-userns", "--setenv", "--cap-add"} {
			if slices.Contains(plan.Args, bad) {
				t.Errorf("%s renders %s", profile, bad)
			}
		}
		for _, must := range []string{"--unshare-pid", "--unshare-uts", "--unshare-ipc", "--die-with-parent", "--new-session", "--proc", "--dev"} {
			if !slices.Contains(plan.Args, must) {
				t.Errorf("%s lacks %s", profile, must)
			}
		}
	}
}

func TestRenderPrivateHomeWithoutHostHome(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1")
	in.User = User{UID: 65534, GID: 65534, Name: "nobody", Home: "/nonexistent"}
	in.Chdir = "/"
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Home != "/tmp/home/nobody" || !strings.Contains(strings.Join(plan.Args, " "), "--tmpfs /tmp/home/nobody") {
		t.Errorf("home = %s", plan.Home)
	}
	delete(in.Policy.Filesystem.Tmpfs, "/tmp")
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "does not exist and /tmp is not a tmpfs") {
		t.Errorf("Render = %v", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	d := host()
	d["srv/proj/.bashrc"] = link("../dotfiles/bashrc")
	d["loop/a"] = link("b")
	d["loop/b"] = link("a")
	for in, want := range map[string]string{
		"/var/run/docker.sock": "/run/docker.sock",
		"/srv/link-to-proj/x":  "/srv/proj/x",
		"/bin/sh":              "/usr/bin/sh",
		"/srv/proj/.bashrc":    "/srv/dotfiles/bashrc",
		"/srv/proj/out/passwd": "/etc/passwd",
	} {
		if got, err := resolve(d, in); err != nil || got != want {
			t.Errorf("resolve(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := resolve(d, "/loop/a"); err == nil {
		t.Error("a symlink loop resolved")
	}
}

// TestRenderProcCovered: when the host's /proc is covered (a container's
// masked paths), the jail fails closed unless the policy allows binding the
// existing /proc, and then says so as a degradation.
func TestRenderProcCovered(t *testing.T) {
	t.Parallel()
	covers := []string{"/proc/kcore", "/proc/timer_list"}

	in := input(t, "tier1", "/srv/proj")
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(plan.Args, " "); !strings.Contains(args, "--proc /proc") || strings.Contains(args, "--bind /proc /proc") || len(plan.Degradations) > 0 {
		t.Errorf("uncovered host: want a fresh /proc and no degradation:\n%s\n%q", args, plan.Degradations)
	}

	in.ProcCovers = covers
	_, err = Render(in)
	if !errors.Is(err, ErrProcCovered) {
		t.Fatalf("covered host, default policy: Render = %v, want ErrProcCovered", err)
	}
	for _, want := range []string{"/proc/kcore, /proc/timer_list", "run `agentjail doctor`", "proc: fresh-or-bind"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}

	in.Policy.Filesystem.Proc = policy.ProcFreshOrBind
	plan, err = Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	if !strings.Contains(args, "--bind /proc /proc --dev /dev") || strings.Contains(args, "--proc /proc") {
		t.Errorf("fresh-or-bind on a covered host: want /proc bound:\n%s", args)
	}
	if !strings.HasPrefix(args, "--unshare-uts --unshare-ipc ") {
		t.Errorf("a bound /proc needs the pid namespace it describes, not a new one:\n%s", args)
	}
	if len(plan.Degradations) != 1 || !strings.Contains(plan.Degradations[0], "/proc/kcore, /proc/timer_list") || !strings.Contains(plan.Degradations[0], "weaker mode") || !strings.Contains(plan.Degradations[0], "no pid namespace") {
		t.Errorf("degradations = %q", plan.Degradations)
	}
}

// TestRenderPinsDirectoriesInsideProtectedNames: every directory between
// a writable root and what is protected below it (the .git of .git/hooks
// at any depth, a .claude holding protected settings, the project's own
// directories above them) is bound over itself before what it holds is
// made read-only, so that it cannot be renamed aside; a link is not, and
// neither is a directory that leads to nothing protected.
func TestRenderPinsDirectoriesInsideProtectedNames(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/sub/.git/hooks"] = dir(0o755, 1000)
	d["srv/proj/.claude/settings.json"] = node(0o644, 1000, 1000, "{}")
	d["srv/proj/.claude/other"] = node(0o644, 1000, 1000, "")
	d["srv/proj/.idea"] = link("/srv/dotfiles")
	d["srv/proj/plain/x"] = node(0o644, 1000, 1000, "")
	in.Policy.Filesystem.AcceptProtectedSymlinks = new(true)
	d["srv/proj/.git/modules/lib/hooks"] = dir(0o755, 1000) // a submodule's git directory
	d["srv/proj/.git/modules/lib/config"] = node(0o644, 1000, 1000, "")
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	order := []string{
		"--bind /srv/proj /srv/proj",
		"--bind /srv/proj/.claude /srv/proj/.claude",
		"--bind /srv/proj/.git /srv/proj/.git",
		"--bind /srv/proj/a /srv/proj/a",
		"--bind /srv/proj/a/b /srv/proj/a/b",
		"--bind /srv/proj/a/b/c /srv/proj/a/b/c",
		"--bind /srv/proj/sub /srv/proj/sub",
		"--bind /srv/proj/sub/.git /srv/proj/sub/.git",
		"--ro-bind /srv/proj/.git/hooks /srv/proj/.git/hooks",
		"--ro-bind /srv/proj/.claude/settings.json /srv/proj/.claude/settings.json",
		"--ro-bind /srv/proj/sub/.git/hooks /srv/proj/sub/.git/hooks",
	}
	for _, want := range []string{
		"--bind /srv/proj/.git/modules /srv/proj/.git/modules",
		"--bind /srv/proj/.git/modules/lib /srv/proj/.git/modules/lib",
		"--ro-bind /srv/proj/.git/modules/lib/hooks /srv/proj/.git/modules/lib/hooks",
		"--ro-bind /srv/proj/.git/modules/lib/config /srv/proj/.git/modules/lib/config",
	} {
		if !strings.Contains(strings.Join(plan.Args, " "), want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	last := -1
	for _, want := range order {
		i := strings.Index(args, want)
		if i < 0 || i < last {
			t.Fatalf("plan lacks %q after the mounts before it:\n%s", want, args)
		}
		if strings.HasPrefix(want, "--bind") {
			last = i
		}
	}
	for _, bad := range []string{"--bind /srv/proj/plain ", "--bind /srv/proj/.idea", "--bind /srv/dotfiles"} {
		if strings.Contains(args, bad) {
			t.Errorf("plan pins %q, which leads to nothing protected, or a link:\n%s", bad, args)
		}
	}
}

// TestRenderProtectsCoreHooksPath: hooks that core.hooksPath moves out of
// .git (husky's .husky/_, a project's .githooks) are protected like
// .git/hooks: read-only where they exist, uncreatable where they do not.
func TestRenderProtectsCoreHooksPath(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/.git/config"] = node(0o644, 1000, 1000, "[core]\n\tbare = false\n\thooksPath = .husky/_\n[alias]\n\thookspath = nothing\n[extensions]\n\tworktreeConfig\n")
	d["srv/proj/.husky/_/pre-commit"] = node(0o755, 1000, 1000, "npx lint-staged\n")
	d["srv/proj/sub/w/.git"] = node(0o644, 1000, 1000, "gitdir: ../../.git/worktrees/w\n")
	// A linked worktree reads the common config and its own
	// config.worktree (with extensions.worktreeConfig); a relative
	// hooksPath is taken from its own top.
	d["srv/proj/.git/worktrees/w/config.worktree"] = node(0o644, 1000, 1000, "[CORE]\n  HooksPath = \"githooks\"\n")
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	for _, want := range []string{
		"--bind /srv/proj/.husky /srv/proj/.husky",
		"--ro-bind /srv/proj/.husky/_ /srv/proj/.husky/_",
		"--ro-bind /run/agentjail/empty /srv/proj/sub/w/githooks", // missing: uncreatable
		"--ro-bind /run/agentjail/empty /srv/proj/sub/w/.husky",   // the common config's, from the worktree
		"--ro-bind /srv/proj/.git/worktrees/w/config.worktree /srv/proj/.git/worktrees/w/config.worktree",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("plan lacks %q:\n%s", want, args)
		}
	}
	if strings.Contains(args, "nothing") {
		t.Errorf("a hookspath outside [core] was read:\n%s", args)
	}
	s := TakeSnapshot(d, in.Policy, nil)
	if _, ok := s["/srv/proj/.husky/_/pre-commit"]; !ok {
		t.Error("the snapshot lacks the hooks under core.hooksPath")
	}
}

// TestRenderReprotectsClaudeOps: every built-in profile that can write a
// repository keeps its .claude-ops directory (the ops loop's MCP config and
// prompts) read-only, so no run can plant servers a later tier would start;
// a repository without one cannot create it.
func TestRenderReprotectsClaudeOps(t *testing.T) {
	t.Parallel()
	for _, profile := range []string{"tier1", "tier2", "tier3", "sealed"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			in := input(t, profile, "/srv/proj", "/srv/cache")
			disk := in.Disk.(fstest.MapFS)
			disk["srv/proj/.claude-ops"] = dir(0o755, 1000)
			disk["srv/proj/.claude-ops/mcp.json"] = node(0o644, 1000, 1000, "{}")
			plan, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Join(plan.Args, " ")
			for _, want := range []string{"--ro-bind /srv/proj/.claude-ops /srv/proj/.claude-ops", "--ro-bind /run/agentjail/empty /srv/cache/.claude-ops"} {
				if !strings.Contains(args, want) {
					t.Errorf("%s does not re-protect .claude-ops: no %q in\n%s", profile, want, args)
				}
			}
		})
	}
}

// TestRenderClaudeHome: the private Claude Code directory is bound at
// ~/.claude after the private home; everything it gets comes from one
// operator home, the one with the login (else the first with a ~/.claude):
// the login and ~/.claude.json copied in, what claude.settings carries
// (what exists of it, of the right kind) copied apart and bound over it
// read-only; claude.dir's sessions bound at ~/.claude/projects.
func TestRenderClaudeHome(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	in.Disk.(fstest.MapFS)["root/.claude/settings.json"] = node(0o600, 0, 0, "{}")
	in.ClaudeSessions = "/run/agentjail/RUN/sessions"
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	home := slices.Index(plan.Args, "/home/agent")
	bind := slices.Index(plan.Args, "/run/agentjail/RUN/claude")
	if home < 0 || bind < home || plan.Args[bind-1] != "--bind" || plan.Args[bind+1] != "/home/agent/.claude" {
		t.Fatalf("no --bind of the claude directory at ~/.claude after the home tmpfs:\n%s", strings.Join(plan.Args, " "))
	}
	want := []Copy{
		{"/home/op/.claude/.credentials.json", "/run/agentjail/RUN/claude/.credentials.json"},
		{"/home/op/.claude.json", "/run/agentjail/RUN/claude/.claude.json"},
		{"/home/op/.claude/settings.json", "/run/agentjail/RUN/claude-config/settings.json"},
		{"/home/op/.claude/CLAUDE.md", "/run/agentjail/RUN/claude-config/CLAUDE.md"},
		{"/home/op/.claude/commands", "/run/agentjail/RUN/claude-config/commands"},
	}
	if got := slices.DeleteFunc(slices.Clone(plan.Copies), func(c Copy) bool { return strings.Contains(c.Dst, "/codex/") }); !slices.Equal(got, want) {
		t.Errorf("copies = %v, want %v", got, want)
	}
	args := strings.Join(plan.Args, " ")
	for _, w := range []string{
		"--bind /run/agentjail/RUN/claude /home/agent/.claude --ro-bind /run/agentjail/RUN/claude-config/settings.json /home/agent/.claude/settings.json " +
			"--ro-bind /run/agentjail/RUN/claude-config/CLAUDE.md /home/agent/.claude/CLAUDE.md --ro-bind /run/agentjail/RUN/claude-config/commands /home/agent/.claude/commands " +
			"--bind /run/agentjail/RUN/sessions /home/agent/.claude/projects",
	} {
		if !strings.Contains(args, w) {
			t.Errorf("no %q in\n%s", w, args)
		}
	}
	if strings.Contains(args, "/home/agent/.claude/agents") {
		t.Errorf("~/.claude/agents is a file and is bound:\n%s", args)
	}
	if c := plan.Claude; c == nil || c.Jail != "/home/agent/.claude" || c.Credentials != "/home/op/.claude/.credentials.json" ||
		c.Settings != "/home/op/.claude/settings.json" || c.Sessions != "/run/agentjail/RUN/sessions" {
		t.Errorf("plan.Claude = %+v", c)
	}

	// Without a login anywhere, the first home with a ~/.claude provides
	// all; without claude.settings and claude.credentials, nothing.
	in = input(t, "tier1", "/srv/proj")
	delete(in.Disk.(fstest.MapFS), "home/op/.claude/.credentials.json")
	if plan, err = Render(in); err != nil {
		t.Fatal(err)
	}
	if plan.Claude == nil || plan.Claude.Credentials != "" || plan.Claude.Settings != "/home/op/.claude/settings.json" {
		t.Errorf("without operator credentials: claude %+v", plan.Claude)
	}
	// Without a login, a home listed first with only a ~/.claude.json
	// (onboarding and trust done) wins over a later one with an empty
	// ~/.claude.
	in2 := input(t, "tier1", "/srv/proj")
	for name := range in2.Disk.(fstest.MapFS) {
		if strings.HasPrefix(name, "home/op/.claude/") || name == "home/op/.claude" {
			delete(in2.Disk.(fstest.MapFS), name)
		}
	}
	in2.Disk.(fstest.MapFS)["root/.claude"] = dir(0o755, 0)
	if plan, err = Render(in2); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.Copies, Copy{"/home/op/.claude.json", "/run/agentjail/RUN/claude/.claude.json"}) {
		t.Errorf("the first home's ~/.claude.json is not copied: %v", plan.Copies)
	}
	in.Policy.Claude.Settings, in.Policy.Claude.Credentials = nil, nil
	if plan, err = Render(in); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(plan.Copies, func(c Copy) bool { return strings.Contains(c.Dst, "claude") }) || plan.Claude.Settings != "" {
		t.Errorf("without settings and credentials: copies %v, claude %+v", plan.Copies, plan.Claude)
	}

	off := false
	in.Policy.Claude.Home = &off
	if plan, err = Render(in); err != nil {
		t.Fatal(err)
	}
	if plan.Claude != nil || slices.Contains(plan.Args, "/run/agentjail/RUN/claude") {
		t.Errorf("claude.home false still binds a claude directory: %+v", plan.Claude)
	}
}

// TestRenderEmitsOnlySupportedOptions renders every built-in profile, and
// the variants that add options (a sealed profile run as uid 0, a minimal
// base, a bound /proc, no network), and requires each option of the plan
// to be in bwrap's table and supported by bwrap.Minimum, the oldest
// release agentjail accepts; a plan for an older bwrap is refused.
func TestRenderEmitsOnlySupportedOptions(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(os.DirFS("../profiles"), "[a-z]*.yaml")
	if err != nil || len(names) < 4 {
		t.Fatalf("built-in profiles: %v %v", names, err)
	}
	type variant struct {
		name string
		in   Input
	}
	var variants []variant
	for _, n := range names {
		in := input(t, strings.TrimSuffix(n, ".yaml"), "/srv/proj")
		in.Seccomp = 2
		variants = append(variants, variant{n, in})
	}
	root := input(t, "sealed", "/srv/rootonly")
	root.User, root.Chdir = User{UID: 0, GID: 0, Name: "root", Home: "/root"}, "/srv/rootonly"
	minimal := input(t, "tier3", "/srv/proj")
	minimal.Policy.Filesystem.Base = policy.BaseMinimal
	bound := input(t, "tier1", "/srv/proj")
	bound.ProcCovers, bound.Policy.Filesystem.Proc = []string{"/proc/kcore"}, policy.ProcFreshOrBind
	offline := input(t, "tier3", "/srv/proj")
	offline.Policy.Network.Mode = policy.NetNone
	variants = append(variants, variant{"sealed as root", root}, variant{"minimal base", minimal}, variant{"bound /proc", bound}, variant{"no network", offline})

	seen := map[string]bool{}
	for _, v := range variants {
		v.in.Bwrap = bwrap.Minimum
		plan, err := Render(v.in)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		opts, err := bwrap.Options(plan.Args)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for _, o := range opts {
			seen[o] = true
			if !bwrap.Minimum.Supports(o) {
				t.Errorf("%s emits %s, which bwrap %s lacks", v.name, o, bwrap.Minimum)
			}
		}
	}
	// The variants reach the options each adds.
	for _, o := range []string{"--uid", "--cap-drop", "--symlink", "--unshare-net", "--unshare-user", "--disable-userns", "--add-seccomp-fd", "--size", "--perms", "--ro-bind-try", "--remount-ro", "--block-fd", "--json-status-fd"} {
		if !seen[o] {
			t.Errorf("no variant emits %s", o)
		}
	}

	old := input(t, "tier1", "/srv/proj")
	old.Bwrap = bwrap.Version{Major: 0, Minor: 6, Patch: 1}
	if _, err := Render(old); !errors.Is(err, bwrap.ErrTooOld) || !strings.Contains(err.Error(), "bubblewrap 0.6.1 lacks --size (since 0.7.0)") {
		t.Errorf("Render for bwrap 0.6.1 = %v, want a refusal naming --size", err)
	}
}

// TestRenderRefusesSymlinkedProtectedPaths: a protected path that is a
// symlink, or lies beyond one, cannot be covered by a mount (the agent
// could replace the link), so the run is refused, naming the link, its
// target and the fixes; accept_protected_symlinks accepts it with a
// warning, protecting the target and leaving the link to the post-run
// check.
func TestRenderRefusesSymlinkedProtectedPaths(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	delete(d, "srv/proj/.git/hooks")
	d["srv/proj/.githooks/pre-commit"] = node(0o755, 1000, 1000, "#!/bin/sh\n")
	d["srv/proj/.git/hooks"] = link("../.githooks")
	d["srv/proj/.env"] = link(".env.real")
	d["srv/proj/.env.real"] = node(0o644, 1000, 1000, "SECRET=1")
	d["srv/proj/sub/.claude"] = link("../../shared-claude") // beyond: .claude/settings.json
	d["srv/shared-claude/settings.json"] = node(0o644, 1000, 1000, "{}")
	_, err := Render(in)
	if !errors.Is(err, ErrProtectedLink) {
		t.Fatalf("Render = %v, want ErrProtectedLink", err)
	}
	for _, want := range []string{
		"symlinked protected path: /srv/proj/.git/hooks -> /srv/proj/.githooks: a mount cannot cover a link",
		"rm /srv/proj/.git/hooks && git config core.hooksPath /srv/proj/.githooks",
		"symlinked protected path: /srv/proj/.env -> /srv/proj/.env.real",
		"rm /srv/proj/.env && cp -a /srv/proj/.env.real /srv/proj/.env",
		"symlinked protected path: /srv/proj/sub/.claude -> /srv/shared-claude",
		"filesystem: {accept_protected_symlinks: true}",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}

	in.Policy.Filesystem.AcceptProtectedSymlinks = new(true)
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	for _, want := range []string{"--ro-bind /srv/proj/.githooks /srv/proj/.githooks", "--ro-bind /srv/proj/.env.real /srv/proj/.env.real"} {
		if !strings.Contains(args, want) {
			t.Errorf("accepted links: the plan lacks %q:\n%s", want, args)
		}
	}
	for _, bad := range []string{"/srv/proj/.git/hooks ", "/srv/proj/.env ", "/srv/proj/sub/.claude"} {
		if strings.Contains(args+" ", bad) {
			t.Errorf("accepted links: the plan mounts over a link (%s):\n%s", bad, args)
		}
	}
	if len(plan.Warnings) != 3 || !strings.Contains(strings.Join(plan.Warnings, "\n"), "/srv/proj/.git/hooks is a symlink to /srv/proj/.githooks") {
		t.Errorf("warnings = %q", plan.Warnings)
	}
}

// TestRenderMasksInsideExistingProtectedDirectories: at the top of a
// writable root every missing protected name is masked; below it, only
// what is missing inside a protected directory that exists (a nested
// repository's .git/hooks and .git/config, a .claude's settings), down to
// protect_depth. Other names missing at depth are left to the post-run
// check, and nothing is masked below a file (a worktree's .git) or a link.
func TestRenderMasksInsideExistingProtectedDirectories(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["srv/proj/sub/.git/HEAD"] = node(0o644, 1000, 1000, "")     // a nested repository without hooks or config
	d["srv/proj/a/b/.claude/x"] = node(0o644, 1000, 1000, "")     // depth 2
	d["srv/proj/a/b/c/d/.git/HEAD"] = node(0o644, 1000, 1000, "") // depth 4 > protect_depth, but a repository
	d["srv/cache/.git"] = node(0o644, 1000, 1000, "gitdir: /srv/proj/.git/worktrees/c\n")
	d["srv/proj/.git/worktrees/c/HEAD"] = node(0o644, 1000, 1000, "")
	in.Policy.Filesystem.Write = append(in.Policy.Filesystem.Write, "/srv/cache")
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	for _, m := range []string{"/srv/proj/sub/.git/hooks", "/srv/proj/sub/.git/config", "/srv/proj/a/b/c/d/.git/hooks", "/srv/proj/a/b/c/d/.git/config", "/srv/proj/a/b/.claude/settings.json", "/srv/proj/a/b/.claude/commands", "/srv/proj/a/b/.claude/agents", "/srv/proj/.mcp.json", "/srv/cache/.env"} {
		if !slices.Contains(plan.Masks, m) {
			t.Errorf("%s is not masked; masks:\n%s", m, strings.Join(plan.Masks, "\n"))
		}
	}
	if !strings.Contains(args, "--bind /srv/proj/sub/.git /srv/proj/sub/.git") {
		t.Errorf("the nested .git is not pinned:\n%s", args)
	}
	for _, m := range plan.Masks {
		if strings.HasPrefix(m, "/srv/proj/sub/.env") || strings.HasPrefix(m, "/srv/proj/a/b/.env") || strings.HasPrefix(m, "/srv/proj/a/b/c/d/.env") || strings.HasPrefix(m, "/srv/cache/.git/") {
			t.Errorf("%s is masked: only protected directories that exist are masked into below the top", m)
		}
	}
}

// TestRenderMissingDirectoryOfProtectedPaths: a missing directory that
// would hold protected paths (.claude, for .claude/settings.json) is an
// empty tmpfs, after which those paths are masked in it, and only the
// directory is a placeholder on the host; one that is protected itself
// stays a file that keeps everything below it from being made (a missing
// .git too: override.golden's /srv/cache/.git). Another run's placeholder, an empty registered directory, counts
// as missing; a registered directory someone put a file in does not.
func TestRenderMissingDirectoryOfProtectedPaths(t *testing.T) {
	t.Parallel()
	tmpfs := "--size 1048576 --tmpfs /srv/proj/.claude"
	inner := "--ro-bind /run/agentjail/empty /srv/proj/.claude/settings.json"
	for _, c := range []struct {
		name        string
		protect     []string
		disk        map[string]*fstest.MapFile
		placeholder bool
		tmpfs       bool
	}{
		{"missing", nil, nil, false, true},
		{"protected itself", []string{".claude"}, nil, false, false},
		{"another run's placeholder", nil, map[string]*fstest.MapFile{"srv/proj/.claude": dir(0o755, 1000)}, true, true},
		{"a placeholder someone wrote in", nil, map[string]*fstest.MapFile{"srv/proj/.claude": dir(0o755, 1000), "srv/proj/.claude/x": node(0o644, 1000, 1000, "")}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := input(t, "tier1", "/srv/proj")
			in.Policy.Filesystem.Protect = append(in.Policy.Filesystem.Protect, c.protect...)
			disk := in.Disk.(fstest.MapFS)
			maps.Copy(disk, c.disk)
			if c.placeholder {
				in.IsPlaceholder = func(p string) bool { return p == "/srv/proj/.claude" }
			}
			plan, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Join(plan.Args, " ")
			t1, t2 := strings.Index(args, tmpfs), strings.Index(args, inner)
			if got := t1 >= 0 && t2 > t1; got != c.tmpfs {
				t.Errorf("a tmpfs with the masks in it: %v, want %v:\n%s", got, c.tmpfs, args)
			}
			if c.tmpfs && (!slices.Contains(plan.Masks, "/srv/proj/.claude") || slices.Contains(plan.Masks, "/srv/proj/.claude/settings.json") || !slices.Contains(plan.Protected, "/srv/proj/.claude/settings.json")) {
				t.Errorf("placeholders on the host %v, protected %v", plan.Masks, plan.Protected)
			}
			if c.name == "protected itself" && (!strings.Contains(args, "--ro-bind /run/agentjail/empty /srv/proj/.claude ") || strings.Contains(args, "/srv/proj/.claude/")) {
				t.Errorf(".claude is not masked whole with a file:\n%s", args)
			}
		})
	}
}

// TestRenderHidesRunDir: agentjail's run directory is covered in the jail,
// after the writable roots (one of which may hold it), and is there, empty,
// wherever it lies (the mask over a missing .git names it): under the
// jail's /tmp, and under a denied directory, whose tmpfs may then be
// traversed to it (0111), not listed; a writable root inside it is refused.
func TestRenderHidesRunDir(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, runDir string
		write, read  []string
		want         string
	}{
		{"root's", "/run/agentjail", nil, nil, "--tmpfs /run/agentjail --remount-ro /run/agentjail"},
		{"under a writable root", "/srv/state/agentjail", []string{"/srv/state"}, nil, "--tmpfs /srv/state/agentjail --remount-ro /srv/state/agentjail"},
		{"under a denied path", "/run/user/1000/agentjail", nil, nil, "--perms 0111 --size 4096 --tmpfs /run/user --perms 0000 --size 4096 --tmpfs /run/user/1000/agentjail --remount-ro /run/user/1000/agentjail --remount-ro /run/user"},
		{"under the jail's /tmp", "/tmp/agentjail-1000", nil, nil, "--tmpfs /tmp/agentjail-1000 --remount-ro /tmp/agentjail-1000"},
		{"under /tmp and a writable root", "/tmp/agentjail-1000", []string{"/tmp"}, nil, "--tmpfs /tmp/agentjail-1000 --remount-ro /tmp/agentjail-1000"},
		{"under /tmp and a read bind", "/tmp/agentjail-1000", nil, []string{"/tmp"}, "--tmpfs /tmp/agentjail-1000 --remount-ro /tmp/agentjail-1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := input(t, "tier1", c.write...)
			in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, c.read...)
			disk := in.Disk.(fstest.MapFS)
			for p := c.runDir; p != "/"; p = path.Dir(p) {
				if _, ok := disk[p[1:]]; !ok {
					disk[p[1:]] = dir(0o755, 1000)
				}
			}
			disk["run"], disk["tmp"] = dir(0o777, 0), dir(0o1777, 1000)
			in.RunDir = c.runDir
			plan, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Join(plan.Args, " ")
			if c.want != "" && !strings.Contains(args, c.want) {
				t.Errorf("plan lacks %q:\n%s", c.want, args)
			}
			for _, w := range c.write {
				if c.want != "" && strings.Index(args, c.want) < strings.Index(args, "--bind "+w+" "+w) {
					t.Errorf("the run directory is covered before the writable root %s is bound over it:\n%s", w, args)
				}
			}
		})
	}
	in := input(t, "tier1", "/run/agentjail/x")
	in.Disk.(fstest.MapFS)["run/agentjail"] = dir(0o755, 0)
	in.Disk.(fstest.MapFS)["run/agentjail/x"] = dir(0o755, 1000)
	in.RunDir = "/run/agentjail"
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "writable root /run/agentjail/x lies inside agentjail's run directory /run/agentjail, which no jail sees") {
		t.Fatalf("Render = %v", err)
	}
}

// TestRenderRefusesAStartDirectoryTheRunUserCannotEnter: bwrap would fail
// with only "Can't chdir to /root: Permission denied".
func TestRenderRefusesAStartDirectoryTheRunUserCannotEnter(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1")
	in.Chdir = "/root"
	in.User.Why = "the owner of /root"
	want := "start directory /root: the run user agent (uid 1000, chosen by the owner of /root) may not enter it; pass --chdir with a directory that user may enter, or choose the run user with --user"
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Render = %v\nwant %q", err, want)
	}
	in.Chdir = "/srv/proj"
	if _, err := Render(in); err != nil {
		t.Fatalf("the agent's own project: %v", err)
	}
}

// TestRenderRefusesClaudeHomeMissingUnderAWritableRoot: with the run
// user's home a writable root and no ~/.claude there, the missing name is
// masked as a protected path and the private Claude directory could not be
// mounted over it (bwrap: "Can't mkdir ...: Not a directory").
func TestRenderRefusesClaudeHomeMissingUnderAWritableRoot(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/home/agent")
	want := "the run's Claude directory /home/agent/.claude lies under a writable root and is not a directory; create it (`mkdir /home/agent/.claude`"
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Render = %v\nwant %q", err, want)
	}
	in.Disk.(fstest.MapFS)["home/agent/.claude"] = dir(0o700, 1000)
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "the run's Codex directory /home/agent/.codex lies under a writable root") {
		t.Fatalf("Render = %v, want the same for ~/.codex", err)
	}
	in.Disk.(fstest.MapFS)["home/agent/.codex"] = dir(0o700, 1000)
	plan, err := Render(in)
	if err != nil {
		t.Fatalf("with ~/.claude and ~/.codex made: %v", err)
	}
	if args := strings.Join(plan.Args, " "); !strings.Contains(args, "--bind /run/agentjail/RUN/claude /home/agent/.claude") {
		t.Errorf("the private Claude directory is not bound:\n%s", args)
	}
}

// TestRenderWarnsOfAMissingReadFlag: a missing path the operator typed
// with --read is worth a word; a profile's optional tool directories are
// not.
func TestRenderWarnsOfAMissingReadFlag(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1")
	n := len(in.Policy.Filesystem.Read)
	in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, "/srv/typo", "/srv/proj")
	in.Policy.Origins[fmt.Sprintf("filesystem.read[%d]", n)] = "--read"
	in.Policy.Origins[fmt.Sprintf("filesystem.read[%d]", n+1)] = "--read"
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--read /srv/typo: no such path; nothing is bound"}; !slices.Equal(plan.Warnings, want) {
		t.Errorf("warnings %q, want %q", plan.Warnings, want)
	}
}

// TestRenderTmpfsMountPoints: bwrap can mount a tmpfs only on a directory
// that exists where the jail shows the host (the read-only base, a
// writable root); inside another tmpfs it makes the directory itself. A
// missing one is refused here, naming the profile line, rather than failing
// inside bubblewrap. A tmpfs inside a writable root is mounted after the
// root's bind, which would hide it.
func TestRenderTmpfsMountPoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, mp string
		minimal  bool
		want     string // "" renders
	}{
		{"missing under the read-only base", "/srv/nope", false, "p.yaml:7:5: filesystem.tmpfs[/srv/nope]: tmpfs mount point /srv/nope does not exist, and bubblewrap cannot make it in the read-only /; create it first (mkdir -p /srv/nope), or mount the tmpfs inside another tmpfs (/tmp/...)"},
		{"missing inside a writable root", "/srv/proj/build", false, "tmpfs mount point /srv/proj/build does not exist, and bubblewrap cannot make it in the writable root /srv/proj without changing the host; create it first"},
		{"a file", "/etc/passwd", false, "tmpfs mount point /etc/passwd is not a directory"},
		{"a symlink", "/srv/link-to-proj", false, "tmpfs mount point /srv/link-to-proj is a symlink to /srv/proj; mount the tmpfs at the directory itself"},
		{"missing inside the jail's /tmp", "/tmp/cache/x", false, ""},
		{"missing under /dev", "/dev/hugepages", false, ""},
		{"missing in a minimal base's empty root", "/work", true, ""},
		{"missing under a minimal base's /usr", "/usr/cache", true, "tmpfs mount point /usr/cache does not exist, and bubblewrap cannot make it in the read-only /usr"},
		{"existing", "/srv/cache", false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := input(t, "tier1", "/srv/proj")
			in.Policy.Filesystem.Tmpfs = maps.Clone(in.Policy.Filesystem.Tmpfs)
			in.Policy.Filesystem.Tmpfs[c.mp] = policy.Tmpfs{Size: 1 << 20}
			in.Policy.Origins = maps.Clone(in.Policy.Origins)
			in.Policy.Origins["filesystem.tmpfs["+c.mp+"]"] = "p.yaml:7:5"
			if c.minimal {
				in.Policy.Filesystem.Base = policy.BaseMinimal
			}
			plan, err := Render(in)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Render = %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Render = %v\nwant %q", err, c.want)
			case c.want == "" && !strings.Contains(strings.Join(plan.Args, " "), "--tmpfs "+c.mp):
				t.Errorf("no tmpfs at %s:\n%s", c.mp, strings.Join(plan.Args, " "))
			}
		})
	}

	in := input(t, "tier1", "/srv/proj")
	in.Policy.Filesystem.Tmpfs = maps.Clone(in.Policy.Filesystem.Tmpfs)
	in.Policy.Filesystem.Tmpfs["/srv/proj/node_modules"] = policy.Tmpfs{Size: 1 << 20}
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	bind, tmpfs := slices.Index(plan.Args, "--bind"), slices.Index(plan.Args, "/srv/proj/node_modules")
	if bind < 0 || plan.Args[bind+1] != "/srv/proj" || tmpfs < bind {
		t.Errorf("the tmpfs inside the writable root comes before the root's bind, which hides it:\n%s", strings.Join(plan.Args, " "))
	}
}

// TestRenderDenyUnderARead: a read-only bind of a home (or above one)
// brings the host's back over the private home; what the profile denies
// in it is hidden again after the bind. A read of a denied path itself is
// refused, as a writable root there is.
func TestRenderDenyUnderARead(t *testing.T) {
	t.Parallel()
	for _, read := range []string{"/home/agent", "/home"} {
		in := input(t, "tier1")
		disk := in.Disk.(fstest.MapFS)
		disk["home/agent"] = dir(0o755, 1000)
		disk["home/agent/.ssh"] = dir(0o700, 1000)
		disk["home/agent/.ssh/id_ed25519"] = node(0o600, 1000, 1000, "key")
		disk["home/agent/.git-credentials"] = node(0o600, 1000, 1000, "https://u:t@example.com")
		disk["home/agent/.claude"], disk["home/agent/.codex"] = dir(0o755, 1000), dir(0o755, 1000) // the agents' mount points
		in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, read)
		plan, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Join(plan.Args, " ")
		bind := strings.Index(args, "--ro-bind-try "+read+" "+read)
		for _, hide := range []string{"--tmpfs /home/agent/.ssh", "--ro-bind /dev/null /home/agent/.git-credentials"} {
			if i := strings.LastIndex(args, hide); bind < 0 || i < bind {
				t.Errorf("--read %s: %q not after the bind:\n%s", read, hide, args)
			}
		}
	}
	in := input(t, "tier1")
	in.Disk.(fstest.MapFS)["home/agent"] = dir(0o755, 1000)
	in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, "/home/agent")
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "the run's Claude directory /home/agent/.claude lies under a read-only bind (filesystem.read, --read) and is not a directory; create it") {
		t.Errorf("a read of a home without .claude: Render = %v", err)
	}
	for _, rd := range []string{"/", "/dev", "/proc/1"} {
		in = input(t, "tier1")
		in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, rd)
		if _, err := Render(in); err == nil || !strings.Contains(err.Error(), rd+" would cover the jail's own /dev and /proc") {
			t.Errorf("--read %s: Render = %v", rd, err)
		}
	}
	in = input(t, "tier1")
	in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, "/home/op/.aws")
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "/home/op/.aws is the denied path /home/op/.aws, which stays hidden; bind something else: the denial is the built-in profile's (profiles/_no-credentials.yaml:") {
		t.Fatalf("a read of a denied path: Render = %v", err)
	}
}

// TestRenderGitIgnore: the masks git would show in a work tree are listed,
// anchored at every directory above each (a directory mask as one entry),
// in a file bound at git's default excludes file in the private home; not
// where the home is the host's.
func TestRenderGitIgnore(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	in.GitIgnoreFile = "/run/agentjail/RUN/git/ignore"
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(plan.Args, " ")
	if !strings.Contains(args, "--ro-bind /run/agentjail/RUN/git/ignore "+plan.Home+"/.config/git/ignore") {
		t.Errorf("no bind of the excludes file:\n%s", args)
	}
	for _, want := range []string{"/.mcp.json", "/proj/.mcp.json", "/srv/proj/.mcp.json", "/.claude/", "/proj/.claude/"} {
		if !slices.Contains(plan.GitIgnore, want) {
			t.Errorf("GitIgnore lacks %q:\n%s", want, strings.Join(plan.GitIgnore, "\n"))
		}
	}
	if slices.Contains(plan.GitIgnore, "/.claude/settings.json") || slices.ContainsFunc(plan.GitIgnore, func(l string) bool { return strings.HasSuffix(l, "/.git") }) {
		t.Errorf("GitIgnore lists what a directory entry covers, or a .git:\n%s", strings.Join(plan.GitIgnore, "\n"))
	}
	in = input(t, "tier1", "/srv/proj")
	in.GitIgnoreFile = "/run/agentjail/RUN/git/ignore"
	in.Policy.Filesystem.Read = append(in.Policy.Filesystem.Read, "/home/agent/.config")
	if plan, err = Render(in); err != nil || plan.GitIgnore != nil || strings.Contains(strings.Join(plan.Args, " "), "git/ignore") {
		t.Errorf("with the host's ~/.config bound: %v, %q", err, plan.GitIgnore)
	}
}

// TestIgnoreName: a name in the excludes file is itself, not a pattern.
func TestIgnoreName(t *testing.T) {
	for name, want := range map[string]string{
		"/app/[id]/.env": `/app/\[id]/.env`, "/a*b?/x": `/a\*b\?/x`, `/back\slash`: `/back\\slash`, "/sp ": `/sp\ `, "/.env": "/.env",
	} {
		if got := ignoreName(name); got != want {
			t.Errorf("ignoreName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestRenderReadOutOfReach: a read entry the run user cannot reach (a
// directory above it closed to that user) is refused, naming the
// directory, where bwrap would say only "Permission denied".
func TestRenderReadOutOfReach(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	d := in.Disk.(fstest.MapFS)
	d["opt"] = dir(0o755, 0)
	d["opt/private"] = dir(0o700, 0)
	d["opt/private/tool"] = node(0o755, 0, 0, "")
	in.Policy = policy.Merge(in.Policy, policy.Policy{Filesystem: policy.Filesystem{Read: []string{"/opt/private/tool"}}, Origins: policy.Origins{"filesystem.read[0]": "--read"}})
	_, err := Render(in)
	want := "--read: filesystem.read[0]: /opt/private/tool is out of the run user agent's reach (uid 1000): /opt/private is closed to that user"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Render = %v\nwant %q", err, want)
	}
	// An operator's file that only looks like a built-in's path is
	// theirs: refused too.
	in.Policy.Origins = maps.Clone(in.Policy.Origins)
	in.Policy.Origins[fmt.Sprintf("filesystem.read[%d]", slices.Index(in.Policy.Filesystem.Read, "/opt/private/tool"))] = "profiles/team/x.yaml:3:7"
	if _, err := Render(in); err == nil || !strings.Contains(err.Error(), "profiles/team/x.yaml:3:7: filesystem.read[") {
		t.Errorf("an operator's profiles/team/x.yaml: Render = %v", err)
	}
	// A built-in's entry names a tool that may be there: one out of
	// reach is left out, and said.
	in = input(t, "tier1", "/srv/proj")
	in.Disk.(fstest.MapFS)["home/agent/.local"] = dir(0o700, 0)
	plan, err := Render(in)
	if err != nil || !slices.ContainsFunc(plan.Warnings, func(w string) bool {
		return strings.Contains(w, "/home/agent/.local/bin is out of the run user agent's reach (/home/agent/.local is closed to that user); nothing is bound")
	}) || slices.Contains(plan.Args, "/home/agent/.local/bin") {
		t.Errorf("Render = %v, warnings %q", err, plan.Warnings)
	}
}

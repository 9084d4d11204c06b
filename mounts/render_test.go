package mounts

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/execstage"
	"github.com/agentjail/agentjail/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// node is one file of the fake host.
func node(mode fs.FileMode, uid, gid uint32, data string) *fstest.MapFile {
	return &fstest.MapFile{Mode: mode, Data: []byte(data), Sys: &syscall.Stat_t{Uid: uid, Gid: gid}}
}

func dir(mode fs.FileMode, uid uint32) *fstest.MapFile {
	return node(fs.ModeDir|mode, uid, uid, "")
}

func link(target string) *fstest.MapFile { return node(fs.ModeSymlink|0o777, 0, 0, target) }

// host is a small Debian-like machine: an agent user (1000) owning a
// project, an operator (1001) whose credentials tier3 shares, and root's
// own secrets.
func host() fstest.MapFS {
	return fstest.MapFS{
		".":                                   dir(0o755, 0),
		"usr":                                 dir(0o755, 0),
		"usr/bin":                             dir(0o755, 0),
		"usr/lib":                             dir(0o755, 0),
		"bin":                                 link("usr/bin"),
		"lib":                                 link("usr/lib"),
		"lib64":                               link("usr/lib64"),
		"etc":                                 dir(0o755, 0),
		"etc/passwd":                          node(0o644, 0, 0, "root:x:0:0::/root:/bin/sh\n"),
		"etc/shadow":                          node(0o640, 0, 42, ""),
		"etc/app":                             dir(0o755, 0),
		"etc/app/secret.conf":                 node(0o644, 0, 0, "k"),
		"tmp":                                 dir(0o1777, 0),
		"var/tmp":                             dir(0o1777, 0),
		"var/run":                             link("/run"),
		"run":                                 dir(0o755, 0),
		"run/docker.sock":                     node(fs.ModeSocket|0o660, 0, 999, ""),
		"dev":                                 dir(0o755, 0),
		"proc":                                dir(0o555, 0),
		"root":                                dir(0o700, 0),
		"root/.ssh":                           dir(0o700, 0),
		"root/.ssh/id_ed25519":                node(0o600, 0, 0, "key"),
		"home":                                dir(0o755, 0),
		"home/agent":                          dir(0o750, 1000),
		"home/agent/.gnupg":                   dir(0o700, 1000),
		"home/agent/.local":                   dir(0o755, 1000),
		"home/agent/.local/bin":               dir(0o755, 1000),
		"home/op":                             dir(0o755, 1001),
		"home/op/.ssh":                        dir(0o700, 1001),
		"home/op/.ssh/id_rsa":                 node(0o600, 1001, 1001, "key"),
		"home/op/.kube":                       dir(0o755, 1001),
		"home/op/.kube/config":                node(0o644, 1001, 1001, "cfg"),
		"home/op/.aws":                        dir(0o755, 1001),
		"home/op/.aws/config":                 node(0o644, 1001, 1001, "cfg"),
		"home/op/.claude":                     dir(0o700, 1001),
		"home/op/.claude/.credentials.json":   node(0o600, 1001, 1001, "{}"),
		"home/op/.claude/settings.json":       node(0o600, 1001, 1001, "{}"),
		"home/op/.claude/CLAUDE.md":           node(0o600, 1001, 1001, "be brief"),
		"home/op/.claude/commands":            dir(0o700, 1001),
		"home/op/.claude/commands/check.md":   node(0o600, 1001, 1001, "check"),
		"home/op/.claude/agents":              node(0o600, 1001, 1001, "not a directory"),
		"home/op/.claude/projects":            dir(0o700, 1001),
		"home/op/.claude.json":                node(0o600, 1001, 1001, "{}"),
		"root/.codex/auth.json":               node(0o600, 0, 0, "{}"),
		"root/.claude.json":                   node(0o600, 0, 0, "{}"),
		"srv":                                 dir(0o755, 0),
		"srv/cache":                           dir(0o755, 1000),
		"srv/proj":                            dir(0o755, 1000),
		"srv/proj/.env":                       node(0o644, 1000, 1000, "SECRET=1"),
		"srv/proj/.env.local":                 node(0o644, 1000, 1000, "SECRET=2"),
		"srv/proj/.git/hooks":                 dir(0o755, 1000),
		"srv/proj/.git/config":                node(0o644, 1000, 1000, ""),
		"srv/proj/.git/HEAD":                  node(0o644, 1000, 1000, ""),
		"srv/proj/cert.pem":                   node(0o644, 1000, 1000, ""),
		"srv/proj/sub/.env":                   node(0o644, 1000, 1000, ""),
		"srv/proj/sub/w/.git":                 node(0o644, 1000, 1000, "gitdir: ../../.git/worktrees/w\n"),
		"srv/proj/.git/worktrees/w/commondir": node(0o644, 1000, 1000, "../..\n"),
		"srv/proj/a/b/c/.env":                 node(0o644, 1000, 1000, ""),
		"srv/proj/a/b/c/d/.env":               node(0o644, 1000, 1000, ""),
		"srv/proj/node_modules/m/.env":        node(0o644, 1000, 1000, ""),
		"srv/proj/out":                        link("/etc"),
		"srv/dotfiles/bashrc":                 node(0o644, 1000, 1000, ""),
		"srv/link-to-proj":                    link("proj"),
		"srv/rootonly":                        dir(0o755, 0),
	}
}

var agent = User{UID: 1000, GID: 1000, Name: "agent", Home: "/home/agent"}

// input loads a profile (a built-in name or a testdata file), lays write
// roots over it as --write would, and expands it for the fake host.
func input(t *testing.T, profile string, write ...string) Input {
	t.Helper()
	l := policy.Loader{Builtins: os.DirFS("../profiles"), ReadFile: os.ReadFile}
	p, err := l.Load(profile)
	if err != nil {
		t.Fatal(err)
	}
	p = policy.Merge(p, policy.Policy{Filesystem: policy.Filesystem{Write: write}, Origins: policy.Origins{"filesystem.write[0]": "--write"}})
	if err := policy.Validate(p); err != nil {
		t.Fatal(err)
	}
	p = policy.Expand(p, policy.Vars{SecretHomes: []string{"/root", "/home/op", "/home/agent"}, RunHome: "/home/agent", PWD: "/srv/proj"})
	var listen []string
	if p.NetMode() == policy.NetProxy {
		listen = []string{"127.0.0.1:3128", "[::1]:3128"} // launch's broker addresses
	}
	return Input{
		IsBuiltinOrigin: l.IsBuiltinOrigin,
		Listen:          listen,
		Policy:          p,
		Disk:            host(),
		User:            agent,
		OperatorHomes:   []string{"/home/op", "/root"},
		Bwrap:           bwrap.Version{Major: 0, Minor: 8},
		Chdir:           "/srv/proj",
		ExecStage:       "/usr/local/bin/agentjail",
		CredentialsDir:  "/run/agentjail/RUN/credentials",
		ClaudeDir:       "/run/agentjail/RUN/claude",
		ClaudeConfigDir: "/run/agentjail/RUN/claude-config",
		CodexDir:        "/run/agentjail/RUN/codex",
		EmptyFile:       "/run/agentjail/empty",
		CommonDirFile:   "/run/agentjail/commondir",
		GitFile:         "/run/agentjail/gitfile",
		Argv:            []string{"claude", "--print", "hi"},
	}
}

// format writes a plan one bwrap option per line, then its other fields.
func format(p Plan) string {
	var b strings.Builder
	for i, a := range p.Args {
		if strings.HasPrefix(a, "--") && i > 0 && (i < 2 || p.Args[i-2] != "--perms" && p.Args[i-2] != "--size") {
			b.WriteString("\n")
		} else if i > 0 {
			b.WriteString(" ")
		}
		if name, ok := p.FDs[i]; ok {
			a += "<" + name + ">"
		}
		b.WriteString(a)
	}
	b.WriteString("\n\nhome: " + p.Home + "\n")
	for _, c := range p.Copies {
		b.WriteString("copy: " + c.Src + " -> " + c.Dst + "\n")
	}
	for _, d := range p.Dirs {
		fmt.Fprintf(&b, "dir: %s (tmpfs of %d)\n", d.Path, d.Size)
	}
	if c := p.Claude; c != nil {
		fmt.Fprintf(&b, "claude: %s at %s, credentials %q, settings %q, sessions %q\n", c.Dir, c.Jail, c.Credentials, c.Settings, c.Sessions)
	}
	if c := p.Codex; c != nil {
		fmt.Fprintf(&b, "codex: %s at %s, auth %q\n", c.Dir, c.Jail, c.Auth)
	}
	for _, m := range p.Masks {
		b.WriteString("mask: " + m + "\n")
	}
	for _, w := range p.Warnings {
		b.WriteString("warning: " + w + "\n")
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./mounts -update rewrites it):\n%s", file, got)
	}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, profile string }{
		{"tier1", "tier1"},
		{"tier2", "tier2"},
		{"tier3", "tier3"},
		{"sealed", "sealed"},
		{"override", "testdata/override.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := input(t, c.profile, "/srv/proj")
			in.Seccomp = 1
			if c.name == "override" { // accept_protected_symlinks
				in.Disk.(fstest.MapFS)["srv/proj/.bashrc"] = link("../dotfiles/bashrc")
			}
			plan, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, format(plan))
		})
	}
}

// TestRenderSpeaksTheStageProtocol: the exec stage's part of a rendered
// line is what the stage parses, and each descriptor the plan names is
// the one the protocol gives that role, so renderer, supervisor and stage
// cannot drift apart.
func TestRenderSpeaksTheStageProtocol(t *testing.T) {
	t.Parallel()
	in := input(t, "tier1", "/srv/proj")
	in.Seccomp = 2
	in.Listen = []string{"127.0.0.1:3128", "[::1]:3128"}
	plan, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	sep := slices.Index(plan.Args, "--")
	if sep < 0 || plan.Args[sep+1] != execstage.Path {
		t.Fatalf("no exec stage after bwrap's --: %q", plan.Args[sep+1:])
	}
	a, err := execstage.Parse(plan.Args[sep+2:])
	if err != nil || a.Report != execstage.FDReport || a.Control != execstage.FDControl || !slices.Equal(a.Listen, in.Listen) ||
		!slices.Equal(a.Argv, in.Argv) || len(a.Rlimits) == 0 {
		t.Errorf("the stage parses %+v, %v from %q", a, err, plan.Args[sep+2:])
	}
	want := map[string]int{"status": execstage.FDStatus, "block": execstage.FDBlock, "exec-report": execstage.FDReport,
		"control": execstage.FDControl, "seccomp-0": execstage.FDSeccomp, "seccomp-1": execstage.FDSeccomp + 1}
	for i, name := range plan.FDs {
		if fd, ok := want[name]; !ok || plan.Args[i] != strconv.Itoa(fd) {
			t.Errorf("argv[%d] = %s names %q; the protocol says %d", i, plan.Args[i], name, want[name])
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("the plan names no descriptor for %v", want)
	}
}

// TestRenderGivesThePtyTheControlChannel: a terminal of the agent's own
// alone opens the control channel (the stage sends the master on it); a
// plan without one has no channel and no --pty (tier3: no broker's
// listeners, which need the channel too).
func TestRenderGivesThePtyTheControlChannel(t *testing.T) {
	t.Parallel()
	for _, pty := range []bool{true, false} {
		in := input(t, "tier3", "/srv/proj")
		in.Pty = pty
		plan, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		sep := slices.Index(plan.Args, "--")
		a, err := execstage.Parse(plan.Args[sep+2:])
		if err != nil || a.Pty != pty || (a.Control == execstage.FDControl) != pty {
			t.Errorf("pty %v: the stage parses %+v, %v", pty, a, err)
		}
	}
}

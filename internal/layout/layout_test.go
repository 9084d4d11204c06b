// Package layout holds the test of the import rules docs/architecture.md
// states: who may import whom, and what the small binaries may link.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentjail/agentjail/"

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Imports    []string // direct, production code only
	Deps       []string // transitive
}

// list runs `go list -json` with args from the module's root.
func list(t *testing.T, args ...string) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

// running are the packages that start, signal or wait for processes, or
// mount: what the pure packages must not reach.
var running = []string{"supervise", "launch", "launcher", "reaper", "procs", "runstate", "runstate/live", "hostfs", "execstage", "broker", "term"}

// TestImportRules: each package imports only what its place in the data
// path allows (docs/architecture.md), directly or through another.
func TestImportRules(t *testing.T) {
	pkgs := list(t, "./...")
	never := map[string][]string{
		// The supervisor runs an argv; it does not render one, know
		// policies, or parse an agent's output.
		"supervise": {"mounts", "policy", "claude", "codex", "launch", "profiles", "doctor", "seccomp", "broker"},
		// doctor judges facts; cmd runs the probe and hands them over.
		"doctor": {"supervise", "launch"},
		// Pure data and rendering: nothing that runs processes.
		"policy": append([]string{"mounts", "claude", "codex", "seccomp"}, running...),
		// mounts writes the exec stage's protocol (execstage.Words), which
		// execstage keeps beside its reader: that import is the protocol's.
		"mounts":   append([]string{"claude", "codex", "seccomp"}, slices.DeleteFunc(slices.Clone(running), func(p string) bool { return p == "execstage" })...),
		"record":   {},
		"claude":   append([]string{"mounts", "policy", "codex"}, running...),
		"codex":    append([]string{"mounts", "policy", "claude"}, running...),
		"reaper":   {"supervise", "launch", "policy", "mounts", "runstate", "claude", "codex", "broker"},
		"procs":    {"policy", "mounts", "supervise", "launch", "record", "claude", "codex", "reaper", "hostfs"},
		"hostfs":   {"policy", "mounts", "supervise", "launch", "claude", "codex", "broker", "reaper"},
		"runstate": {"policy", "mounts", "supervise", "launch", "claude", "codex", "profiles", "seccomp", "broker"},
		// The broker is handed rules and listeners; it starts no process.
		"broker":    {"mounts", "supervise", "launch", "reaper", "claude", "codex", "profiles", "seccomp"},
		"execstage": {"policy", "mounts", "supervise", "launch", "claude", "codex", "hostfs", "procs", "broker"},
		"term":      {"policy", "mounts", "supervise", "launch", "claude", "codex", "broker", "record"},
		// The launcher hands a request to cmd/agentjail as a command
		// line; it knows processes and sockets, never runs or policies.
		"launcher": {"policy", "mounts", "supervise", "launch", "claude", "codex", "broker", "seccomp", "profiles", "reaper", "term", "execstage"},
	}
	for from, bad := range never {
		p, ok := pkgs[from]
		if !ok {
			t.Errorf("no package %s", from)
			continue
		}
		if imports := ours(p.Imports); from == "record" && len(imports) > 0 {
			t.Errorf("record imports %v: it is the schema everything else reports into", imports)
		}
		deps := ours(p.Deps)
		for _, b := range bad {
			if slices.Contains(deps, b) {
				t.Errorf("%s imports %s (directly or through another of ours)", from, b)
			}
		}
	}
	// Only the run's owner brings rendering and supervision together.
	for name, p := range pkgs {
		imports := ours(p.Imports)
		if name != "launch" && slices.Contains(imports, "mounts") && slices.Contains(imports, "supervise") {
			t.Errorf("%s imports both mounts and supervise: only launch may", name)
		}
	}
}

// TestSmallBinariesLinkLittle: PID 1 (agentjail-init) links no YAML
// library, no policy, no rendering, no agent parser and no network stack:
// it stays small for a container's life. (The exec stage, agentjail-exec,
// is C.)
func TestSmallBinariesLinkLittle(t *testing.T) {
	for _, bin := range []string{"cmd/agentjail-init"} {
		deps := list(t, "-deps", "./"+bin)
		for d := range deps {
			for _, bad := range []string{"policy", "mounts", "claude", "codex", "profiles", "launch", "supervise", "seccomp", "github.com/goccy/go-yaml", "github.com/urfave/cli", "net"} {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("%s links %s", bin, d)
				}
			}
		}
	}
}

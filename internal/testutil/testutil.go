// Package testutil holds what agentjail's tests share: the one place that
// decides whether a test needing root or bubblewrap runs or skips (and
// says why), and JSON Schema checking.
//
// It is imported by tests only.
package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RequireRoot skips t unless it runs as root. `make test` runs as root, so
// there these tests run.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root (make test runs as root)")
	}
}

// RequireBwrap skips t unless bubblewrap is installed, and returns its path.
func RequireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("needs bubblewrap (make deps installs it)")
	}
	return p
}

// CompileSchema compiles a JSON Schema document.
func CompileSchema(t testing.TB, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return s
}

// Validate checks a JSON document (or any value that marshals to one)
// against s and returns the validation error.
func Validate(s *jsonschema.Schema, v any) error {
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// ClaudeVersion is the Claude Code release the end-to-end tests drive: the
// last whose npm package runs on this project's Node 20 hosts.
const ClaudeVersion = "2.1.197"

// CodexVersion is the Codex CLI release the end-to-end tests drive.
const CodexVersion = "0.169.0"

// ClaudeDir is where `make test` installs Claude Code (npm --prefix),
// outside /tmp and any home so that the jails, which cover those, still
// see it. $AGENTJAIL_TEST_CLAUDE_DIR overrides it.
func ClaudeDir() string { return agentDir("AGENTJAIL_TEST_CLAUDE_DIR", "claude") }

// CodexDir is where `make test` installs the Codex CLI, as ClaudeDir.
// $AGENTJAIL_TEST_CODEX_DIR overrides it.
func CodexDir() string { return agentDir("AGENTJAIL_TEST_CODEX_DIR", "codex") }

func agentDir(env, name string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	return "/var/cache/agentjail-test/" + name
}

// npmAgent is one agent CLI the tests install from npm (.ci/npm-agent).
type npmAgent struct {
	sync.Once
	dir, pkg, version, bin string
	path, skip, fail       string
}

var (
	claudeCLI = &npmAgent{pkg: "@anthropic-ai/claude-code", version: ClaudeVersion, bin: "claude"}
	codexCLI  = &npmAgent{pkg: "@openai/codex", version: CodexVersion, bin: "codex"}
)

// RequireClaude returns the path of the claude binary the tests drive,
// installing it first when it is missing (.ci/npm-agent, as `make test`
// does). It skips t only when npm or its registry cannot be reached, and
// fails it when the install fails otherwise.
func RequireClaude(t testing.TB) string {
	t.Helper()
	claudeCLI.dir = ClaudeDir()
	return claudeCLI.require(t)
}

// RequireCodex is RequireClaude for the Codex CLI.
func RequireCodex(t testing.TB) string {
	t.Helper()
	codexCLI.dir = CodexDir()
	return codexCLI.require(t)
}

func (a *npmAgent) require(t testing.TB) string {
	t.Helper()
	a.Do(func() {
		bin := filepath.Join(a.dir, "node_modules", ".bin", a.bin)
		// claude prints "2.1.197 (Claude Code)", codex "codex-cli 0.169.0".
		if out, err := exec.Command(bin, "--version").Output(); err == nil && slices.Contains(strings.Fields(string(out)), a.version) {
			a.path = bin
			return
		}
		root, err := repoRoot()
		if err != nil {
			a.fail = err.Error()
			return
		}
		if err := os.MkdirAll(filepath.Dir(a.dir), 0o755); err != nil {
			a.fail = err.Error()
			return
		}
		// One install at a time, whichever test binary asks.
		lock, err := os.OpenFile(a.dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			a.fail = err.Error()
			return
		}
		defer lock.Close()
		syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		cmd := exec.Command(filepath.Join(root, ".ci", "npm-agent"), a.dir, a.pkg, a.version, a.bin)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			a.path = bin
		case errors.As(err, &ee) && ee.ExitCode() == 2:
			a.skip = strings.TrimSpace(string(out))
		default:
			a.fail = fmt.Sprintf(".ci/npm-agent: %v\n%s", err, out)
		}
	})
	switch {
	case a.skip != "":
		t.Skip(a.skip)
	case a.fail != "":
		t.Fatalf("cannot install %s %s: %s", a.pkg, a.version, a.fail)
	}
	return a.path
}

// repoRoot is the directory of go.mod above the current one.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the current directory")
		}
		dir = parent
	}
}

// Build builds the binaries a release ships into dir, as make build does:
// agentjail, and next to it agentjail-init (static, no cgo), which
// `agentjail init` hands over to, and agentjail-exec (static C), which
// every jail runs as its exec stage. It returns agentjail's path.
func Build(dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	for _, c := range []struct{ name, src string }{{"agentjail-exec", "stage.c"}, {"agentjail-run", "client.c"}} {
		if out, err := exec.Command("gcc", "-static", "-Os", "-s", "-Wall", "-Werror", "-o", filepath.Join(dir, c.name), filepath.Join(root, "cmd", c.name, c.src)).CombinedOutput(); err != nil {
			return "", fmt.Errorf("gcc %s: %v\n%s", c.name, err, out)
		}
	}
	for _, b := range []struct{ name, cgo string }{{"agentjail", "1"}, {"agentjail-init", "0"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), "github.com/agentjail/agentjail/cmd/"+b.name)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", b.name, err, out)
		}
	}
	return filepath.Join(dir, "agentjail"), nil
}

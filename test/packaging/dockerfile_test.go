package packaging

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	image, name string
	body        []instruction
}

// parseDockerfile splits a Dockerfile into stages (the Dockerfile reference:
// `#` starts a comment line, a trailing `\` continues a line).
func parseDockerfile(t *testing.T, text string) (global []instruction, stages []stage) {
	t.Helper()
	var cur *instruction
	var all []instruction
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if cur == nil && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur != nil && strings.HasPrefix(line, "#") {
			continue // comments inside a continued instruction are dropped
		}
		cont := strings.HasSuffix(line, "\\")
		line = strings.TrimSuffix(line, "\\")
		if cur == nil {
			cmd, args, _ := strings.Cut(line, " ")
			cur = &instruction{line: i + 1, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		} else {
			cur.args += " " + strings.TrimSpace(line)
		}
		if !cont {
			all = append(all, *cur)
			cur = nil
		}
	}
	if cur != nil {
		t.Fatalf("Dockerfile:%d: continued past the end", cur.line)
	}
	for _, in := range all {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			s := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else if len(f) != 1 {
				t.Fatalf("Dockerfile:%d: FROM %s", in.line, in.args)
			}
			stages = append(stages, s)
		case len(stages) == 0:
			global = append(global, in)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return global, stages
}

// execForm decodes an exec-form (JSON array) ENTRYPOINT or CMD.
func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.args), &v); err != nil {
		t.Fatalf("Dockerfile:%d: %s is not in exec form (a JSON array): %v", in.line, in.cmd, err)
	}
	return v
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// TestDockerfile checks the Dockerfile statically (no Docker engine runs
// here): the stages and their bases, the build with cgo and the release
// check, the runtime packages and the pinned Claude Code, the non-root
// user, ENTRYPOINT and CMD, and that every COPY source exists in the build
// context or is produced by the stage it is copied from.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	global, stages := parseDockerfile(t, string(data))
	if len(global) != 0 {
		t.Errorf("instructions before the first FROM: %v", global)
	}
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2 (build, runtime)", len(stages))
	}
	build, final := stages[0], stages[1]

	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if want := "golang:" + string(goVer[1]) + "-bookworm"; build.image != want || build.name != "build" {
		t.Errorf("build stage: FROM %s AS %s, want %s AS build (go.mod's Go, Debian 12 like the runtime)", build.image, build.name, want)
	}
	if final.image != "debian:12-slim" || final.name != "" {
		t.Errorf("runtime stage: FROM %s, want debian:12-slim", final.image)
	}

	buildRuns := strings.Join(argsOf(build.all("RUN")), "\n")
	for _, want := range []string{"libseccomp-dev", "CGO_ENABLED=1", "-X main.version=${VERSION}", "-o /out/agentjail ./cmd/agentjail", "CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\" -o /out/agentjail-init ./cmd/agentjail-init", "gcc -static -Os -s -Wall -Werror -o /out/agentjail-exec cmd/agentjail-exec/stage.c", "gcc -static -Os -s -Wall -Werror -o /out/agentjail-run cmd/agentjail-run/client.c", `./.ci/release --check "$(go env GOARCH)" /out/agentjail`, "seccomp export --for-container > /out/seccomp-container.json"} {
		if !strings.Contains(buildRuns, want) {
			t.Errorf("build stage does not %q", want)
		}
	}

	runs := final.all("RUN")
	finalRuns := strings.Join(argsOf(runs), "\n")
	install := regexp.MustCompile(`apt-get install -y --no-install-recommends ([^&]*)`).FindStringSubmatch(finalRuns)
	if install == nil {
		t.Fatal("runtime stage installs no packages")
	}
	for _, p := range []string{"bubblewrap", "libseccomp2", "nodejs", "ca-certificates", "socat", "ripgrep"} {
		if !strings.Contains(" "+install[1]+" ", " "+p+" ") {
			t.Errorf("runtime stage does not install %s (installs %s)", p, install[1])
		}
	}
	pin := regexp.MustCompile(`(?m)^CLAUDE_CODE_VERSION=(\S+)$`).FindStringSubmatch(strings.Join(argsOf(final.all("ARG")), "\n"))
	if pin == nil || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(pin[1]) || !strings.Contains(finalRuns, `npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"`) {
		t.Errorf("Claude Code is not installed at a pinned exact version (ARG CLAUDE_CODE_VERSION=x.y.z): %v", pin)
	}
	if !strings.Contains(finalRuns, "useradd --uid 1000 --user-group") {
		t.Error("runtime stage does not create the agent user with uid 1000")
	}
	// The ops loop's default directories, writable by the agent user.
	if !strings.Contains(finalRuns, "install -d -o 1000 -g 1000 /state /repos /results") {
		t.Error("runtime stage does not create /state, /repos and /results for uid 1000")
	}
	if want := makeVar(t, "CLAUDE_VERSION"); pin != nil && len(want) == 1 && pin[1] != want[0] {
		t.Errorf("the image pins Claude Code %s, the end-to-end tests drive %s (Makefile CLAUDE_VERSION)", pin[1], want[0])
	}

	// USER: numeric 1000, the last one, after every RUN (which need root).
	users := final.all("USER")
	if len(users) != 1 || users[0].args != "1000:1000" {
		t.Fatalf("USER %v, want exactly one USER 1000:1000", users)
	}
	if runs[len(runs)-1].line > users[0].line {
		t.Errorf("Dockerfile:%d: RUN after USER", runs[len(runs)-1].line)
	}

	eps, cmds := final.all("ENTRYPOINT"), final.all("CMD")
	if len(eps) != 1 || strings.Join(execForm(t, eps[0]), " ") != "agentjail init --" {
		t.Errorf("ENTRYPOINT %v, want [\"agentjail\", \"init\", \"--\"]", eps)
	}
	if len(cmds) != 1 {
		t.Fatalf("%d CMDs, want 1", len(cmds))
	}
	cmd := execForm(t, cmds[0])

	// Every COPY: from the context (exists, not ignored) or from a stage
	// that writes it. contextPath maps an image path back to the context.
	ignore := dockerignore(t)
	contextPath := map[string]string{}
	for _, s := range stages {
		for _, in := range s.all("COPY") {
			f := strings.Fields(in.args)
			from := ""
			if v, ok := strings.CutPrefix(f[0], "--from="); ok {
				from, f = v, f[1:]
			}
			if len(f) < 2 {
				t.Fatalf("Dockerfile:%d: COPY %s", in.line, in.args)
			}
			srcs, dst := f[:len(f)-1], f[len(f)-1]
			for _, src := range srcs {
				if from != "" {
					if from != build.name || !strings.Contains(buildRuns, "-o "+src) && !strings.Contains(buildRuns, "> "+src) {
						t.Errorf("Dockerfile:%d: COPY --from=%s %s: no RUN of stage %q writes it", in.line, from, src, from)
					}
					continue
				}
				clean := path.Clean(src)
				if clean != "." && ignore.MatchString(clean) {
					t.Errorf("Dockerfile:%d: COPY %s: .dockerignore excludes it", in.line, src)
				}
				if _, err := os.Stat(filepath.Join(repo, clean)); err != nil {
					t.Errorf("Dockerfile:%d: COPY %s: not in the build context: %v", in.line, src, err)
				}
				if strings.HasSuffix(src, "/") && strings.HasSuffix(dst, "/") {
					contextPath[dst] = clean + "/"
				}
			}
		}
	}

	// CMD runs the ops loop, examples/claude-ops/ops-loop.sh in the context.
	var src string
	for dst, ctx := range contextPath {
		if rest, ok := strings.CutPrefix(cmd[0], dst); ok {
			src = ctx + rest
		}
	}
	if src != "examples/claude-ops/ops-loop.sh" {
		t.Fatalf("CMD %q is %q in the build context, want examples/claude-ops/ops-loop.sh", cmd, src)
	}
	if fi, err := os.Stat(filepath.Join(repo, src)); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("CMD's %s is not an executable file in the tree: %v", src, err)
	}
}

func argsOf(ins []instruction) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.args)
	}
	return out
}

// dockerignore compiles .dockerignore's plain patterns (no `!`
// exceptions, which it does not use) into one regexp over cleaned paths.
func dockerignore(t *testing.T) *regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var alts []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			t.Fatalf(".dockerignore: exception %q: extend this check first", l)
		}
		q := regexp.QuoteMeta(path.Clean(l))
		q = strings.ReplaceAll(q, `\*`, `[^/]*`)
		alts = append(alts, q+`(/.*)?`)
	}
	return regexp.MustCompile(`^(` + strings.Join(alts, "|") + `)$`)
}

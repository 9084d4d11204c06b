package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentjail/agentjail/internal/testutil"
)

// docBlock is one fenced code block of a document.
type docBlock struct {
	file   string
	line   int    // of the opening fence
	info   string // the fence's info string: sh, yaml, ...
	text   string
	notRun string // the reason given by a <!-- not run: REASON --> just above it
}

func (b docBlock) String() string { return b.file + ":" + strconv.Itoa(b.line) }

// notRunMark is the mark a shell block that cannot run on a test machine
// carries, on the line above it (blank lines between are allowed).
var notRunMark = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// docFiles are the documents whose commands the tests answer for.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "docs/*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	return append([]string{filepath.Join(repo, "README.md")}, files...)
}

// blocks returns the fenced code blocks of a Markdown file.
func blocks(t *testing.T, file string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(repo, file)
	lines := strings.Split(string(data), "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		b := docBlock{file: rel, line: i + 1, info: strings.TrimSpace(info)}
		for p := i - 1; p >= 0; p-- {
			if strings.TrimSpace(lines[p]) == "" {
				continue
			}
			if m := notRunMark.FindStringSubmatch(strings.TrimSpace(lines[p])); m != nil {
				b.notRun = m[1]
			}
			break
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: a code block that is never closed", rel, i+1)
		}
		b.text = strings.Join(lines[i+1:j], "\n") + "\n"
		out = append(out, b)
		i = j
	}
	return out
}

// TestDocsShellBlocksAreRunOrMarked: every shell command shown in the
// README and docs/ is in a ```sh block, and every such block either runs
// in TestDocsCommandsRun or says, just above it, why it cannot run on a
// test machine (<!-- not run: REASON -->). A mark on anything else is a
// mistake too. Enough of them run, and show their output, for
// TestDocsCommandsRun to check something.
func TestDocsShellBlocksAreRunOrMarked(t *testing.T) {
	t.Parallel()
	runs, shown := 0, 0
	for _, f := range docFiles(t) {
		for _, b := range blocks(t, f) {
			switch {
			case slices.Contains([]string{"bash", "shell", "console", "shell-session"}, b.info):
				t.Errorf("%s: a ```%s block: write shell commands in ```sh blocks, which the docs test runs", b, b.info)
			case b.info != "sh" && b.notRun != "":
				t.Errorf("%s: a ```%s block marked not run: only ```sh blocks run", b, b.info)
			case b.info == "" && regexp.MustCompile(`(?m)^(\$ |sudo |agentjail [a-z])`).MatchString(b.text) && !strings.HasPrefix(b.text, "agentjail: "):
				t.Errorf("%s: shell commands in a block without an info string: make it ```sh (run, or marked not run)", b)
			case b.info == "sh" && b.notRun == "":
				runs++
				shown += len(b.shown())
			}
		}
	}
	if runs < 10 {
		t.Errorf("only %d blocks run: the docs test would prove little", runs)
	}
	if shown < 10 {
		t.Errorf("only %d lines of output shown in the blocks that run (# OUTPUT after a command): the docs test would check little of what they say", shown)
	}
}

// shownLine is a line of output a block documents: a whole-line comment
// after its first command.
type shownLine struct {
	line int // in the file
	text string
}

// shown returns the output the block documents: every whole-line comment
// after its first command, without its "#" and the spaces around the text.
// Comments before the first command and comments at the end of a command
// line are prose.
func (b docBlock) shown() []shownLine {
	var out []shownLine
	command := false
	for i, l := range strings.Split(b.text, "\n") {
		l = strings.TrimSpace(l)
		switch c, ok := strings.CutPrefix(l, "#"); {
		case l == "":
		case !ok:
			command = true
		case command:
			out = append(out, shownLine{b.line + 1 + i, strings.TrimSpace(c)})
		}
	}
	return out
}

// shownIn reports whether a documented line is a line of out, "…" in it
// standing for any text. Spaces are compared as a table's columns need:
// those around a line are ignored, a run of them inside it counts as one.
func shownIn(want, out string) bool {
	spaces := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	parts := strings.Split(spaces(want), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	return slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return re.MatchString(spaces(l)) })
}

// TestDocsCommandsRun runs every ```sh block of the README and docs/ not
// marked otherwise, as an operator would: as root, with the agentjail just
// built first on the PATH, in a directory of an unprivileged user's (the
// run user, as an operator's project would be), each document's blocks
// in order in a directory of its own (a block may use what an earlier one
// made). Each must exit 0: a command whose failure the docs show ends
// with `|| echo "exit $?"`.
//
// The output a block shows is checked too. The convention: a whole-line
// comment after the block's first command is a line of output, which must
// be a line of the block's combined stdout and stderr (in any order; "…"
// stands for any text, and spaces count as in shownIn):
//
//	agentjail run --write . --timeout 2 -- sleep 60 || echo "exit $?"
//	# agentjail: the run ended: wall limit 2s reached (exit 124)
//	# exit 124
//	agentjail stop "$(cat run-id)"   # a comment at the end of a line is prose
//
// Comments before the first command are prose too; so a line of a
// here-document or a quoted string in a block must not start with "#".
func TestDocsCommandsRun(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	t.Parallel()
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	if _, err := testutil.Build(bin); err != nil {
		t.Fatal(err)
	}
	for _, f := range docFiles(t) {
		var run []docBlock
		for _, b := range blocks(t, f) {
			if b.info == "sh" && b.notRun == "" {
				run = append(run, b)
			}
		}
		if len(run) == 0 {
			continue
		}
		t.Run(run[0].file, func(t *testing.T) {
			t.Parallel()
			// Not under /tmp, /var/tmp or a home: the jail covers those
			// with tmpfs mounts of its own, and a command without
			// --write would start in a directory the jail cannot see.
			dir, err := os.MkdirTemp("/var/lib", "agentjail-docs-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			os.Chmod(dir, 0o755)
			if err := os.Chown(dir, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			for _, b := range run {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				cmd := exec.CommandContext(ctx, "sh", "-eu", "-c", b.text)
				// A block that hangs is ended with what it started in
				// the background.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
				cmd.WaitDelay = 10 * time.Second
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Errorf("%s: %v\n%s\n--- output:\n%s", b, err, b.text, out)
					continue
				}
				for _, s := range b.shown() {
					if !shownIn(s.text, string(out)) {
						t.Errorf("%s:%d: the output shown, %q, is not a line of the block's output:\n%s", b.file, s.line, s.text, out)
					}
				}
			}
		})
	}
}

// TestDocsDockerRunsMountWhatTheyWrite: the docker run lines in the docs
// cannot run here, so they are read: a writable root given to agentjail
// inside the container (--write P) is a mount of the container (-v
// SRC:P), and a claude run gets its API key (by name, or from a file).
func TestDocsDockerRunsMountWhatTheyWrite(t *testing.T) {
	t.Parallel()
	seen := 0
	for _, f := range docFiles(t) {
		for _, b := range blocks(t, f) {
			text := strings.ReplaceAll(b.text, "\\\n", " ")
			for _, line := range strings.Split(text, "\n") {
				docker, inner, ok := strings.Cut(line, "docker run ")
				if !ok || docker != "" && !strings.HasSuffix(docker, " ") {
					continue
				}
				seen++
				opts, cmd := inner, ""
				if i := strings.Index(inner, " agentjail run "); i >= 0 {
					opts, cmd = inner[:i], inner[i:]
				}
				for _, m := range regexp.MustCompile(`--write[ =](\S+)`).FindAllStringSubmatch(cmd, -1) {
					if !regexp.MustCompile(`-v \S*:` + regexp.QuoteMeta(m[1]) + `(:|[ "]|$)`).MatchString(opts) {
						t.Errorf("%s: docker run gives agentjail --write %s, which it does not mount (-v SRC:%[2]s):\n%s", b, m[1], line)
					}
				}
				if strings.Contains(line, "claude") && !regexp.MustCompile(`-e (ANTHROPIC_API_KEY|ANTHROPIC_API_KEY_FILE|CLAUDE_CODE_OAUTH_TOKEN)\b`).MatchString(opts) {
					t.Errorf("%s: docker run starts claude without passing a key (-e ANTHROPIC_API_KEY, …):\n%s", b, line)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no docker run line found: the test reads nothing")
	}
}

// TestReadmeMapsEveryDoc: the README's map names every document in docs/.
func TestReadmeMapsEveryDoc(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range docFiles(t)[1:] {
		if name := "(docs/" + filepath.Base(f) + ")"; !strings.Contains(string(readme), name) {
			t.Errorf("README.md's map does not link %s: add a row to its Read on table", name[1:len(name)-1])
		}
	}
}

// TestDocsLinks: every relative link of the README and docs/ names a file
// that exists, and a heading of it where it names one (#anchor, as GitHub
// makes them: lower case, punctuation dropped, spaces as dashes).
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string][]string{}
	anchorsOf := func(file string) []string {
		if a, ok := anchors[file]; ok {
			return a
		}
		data, _ := os.ReadFile(file)
		var out []string
		inCode := false
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "```") {
				inCode = !inCode
			}
			if h, ok := strings.CutPrefix(l, "#"); ok && !inCode {
				h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
				h = regexp.MustCompile(`[^\p{L}\p{N} _-]`).ReplaceAllString(h, "")
				out = append(out, strings.ReplaceAll(h, " ", "-"))
			}
		}
		anchors[file] = out
		return out
	}
	for _, f := range docFiles(t) {
		data, _ := os.ReadFile(f)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
			}
			rel, _ := filepath.Rel(repo, f)
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link to %s: no such file", rel, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !slices.Contains(anchorsOf(file), anchor) {
				t.Errorf("%s: link to %s: no such heading", rel, target)
			}
		}
	}
}

// TestInstallDocListsThePackages: docs/install.md lists the Makefile's
// packages as they are, and each agent CLI its targets install with npm
// (.ci/npm-agent DIR PACKAGE VERSION BIN): the package, its target, its
// directory and the variable that overrides it.
func TestInstallDocListsThePackages(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repo, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"RUNTIME_PKGS", "TEST_PKGS"} {
		if list := "`" + strings.Join(makeVar(t, v), " ") + "`"; !strings.Contains(string(doc), list) {
			t.Errorf("docs/install.md does not list %s as the Makefile has it: %s", v, list)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	agents := regexp.MustCompile(`(?m)^([a-z]+):\n\t-?@?\./\.ci/npm-agent \$\((\w+)\) (\S+) `).FindAllStringSubmatch(string(makefile), -1)
	if len(agents) < 2 {
		t.Fatalf("the Makefile installs %d agent CLIs with .ci/npm-agent, want claude and codex: the test reads nothing", len(agents))
	}
	for _, a := range agents {
		target, dirVar, pkg := a[1], a[2], a[3]
		dir := regexp.MustCompile(`(?m)^export ` + dirVar + ` \?= (\S+)$`).FindStringSubmatch(string(makefile))
		if dir == nil {
			t.Fatalf("the Makefile gives %s no default (export %[1]s ?= DIR)", dirVar)
		}
		for _, want := range []string{"`" + pkg + "`", "`make " + target + "`", "`" + dir[1] + "`", "`$" + dirVar + "`"} {
			if !strings.Contains(string(doc), want) {
				t.Errorf("docs/install.md does not name %s, which make %s installs with npm (%s)", want, target, pkg)
			}
		}
	}
}

// TestCodeCitesDocsThatExist: a Go file that cites one of the project's
// documents (docs/<name>.md, or a capitalised one at the root such as
// README.md) names a file of the tree; comments cited a document at the
// root long after it had gone. CLAUDE.md and SKILL.md are Claude Code's
// files, not the project's.
func TestCodeCitesDocsThatExist(t *testing.T) {
	t.Parallel()
	cite := regexp.MustCompile(`\b(docs/[a-z0-9-]+\.md|[A-Z][A-Z0-9_]*\.md)\b`)
	seen := 0
	err := filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && d.Name() == ".git" {
			return err
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, path)
		for i, l := range strings.Split(string(data), "\n") {
			for _, m := range cite.FindAllString(l, -1) {
				if m == "CLAUDE.md" || m == "SKILL.md" {
					continue
				}
				seen++
				if _, err := os.Stat(filepath.Join(repo, m)); err != nil {
					t.Errorf("%s:%d: cites %s, which is not in the tree", rel, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Error("no Go file cites a document: the test reads nothing")
	}
}

package mounts

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitConfigCases are configuration files written the ways git accepts, and
// rejects, that matter to what agentjail protects.
var gitConfigCases = []struct {
	name, in string
	want     []string // name=value, or name alone without "="
}{
	{"plain", "[include]\n\tpath = a.cfg\n", []string{"include.path=a.cfg"}},
	{"same line as the header", "[include]path=b.cfg\n", []string{"include.path=b.cfg"}},
	{"case", "[InClUdE]\n\tPATH = C.cfg\n", []string{"include.path=C.cfg"}},
	{"includeIf keeps its condition's case", "[includeIf \"gitdir:~/Work/\"]\n  path = ~/w.cfg\n", []string{"includeif.gitdir:~/Work/.path=~/w.cfg"}},
	{"subsection escapes", "[includeIf \"a\\\"b\\\\c\"]\npath=x\n", []string{"includeif.a\"b\\c.path=x"}},
	{"legacy subsection lowercased", "[Include.Sub]\npath=x\n", []string{"include.sub.path=x"}},
	{"quotes in the middle", "[include]\npath = \"sp ace\"/x\" y\"\n", []string{"include.path=sp ace/x y"}},
	{"comments", "# c\n; c\n[include] ; c\npath = a # b\npath = \"a # b\"\n", []string{"include.path=a", "include.path=a # b"}},
	{"continued line", "[include]\npath = a\\\nb\n", []string{"include.path=ab"}},
	{"escapes", "[x]\nv = a\\tb\\\\c\\\"d\n", []string{"x.v=a\tb\\c\"d"}},
	{"each inner space one, ends trimmed", "[x]\nv =   a  \t b   \n", []string{"x.v=a    b"}},
	{"no value", "[extensions]\n\tworktreeConfig\n", []string{"extensions.worktreeconfig"}},
	{"empty value", "[x]\nv =\n", []string{"x.v="}},
	{"CRLF", "[include]\r\npath = a\r\n", []string{"include.path=a"}},
	{"BOM", "\xef\xbb\xbf[include]\npath = a\n", []string{"include.path=a"}},
	{"no newline at the end", "[include]\npath = a", []string{"include.path=a"}},
	{"NUL ends a value", "[include]\npath = a\x00b\n", []string{"include.path=a"}},
	{"key before any section", "k = v\n[s]\nk = w\n", []string{"k=v", "s.k=w"}},
	{"stops at a bad line", "[include]\npath = a\n!bad\npath = b\n", []string{"include.path=a"}},
	{"stops at an unknown escape", "[x]\nv = a\n w = \\q\n[include]\npath = c\n", []string{"x.v=a"}},
	{"stops at an open quote", "[x]\nv = \"a\n[include]\npath = c\n", []string{}},
	{"stops at an empty section", "[]\n[include]\npath = c\n", []string{}},
	{"stops at a partial BOM", "\xef\xbb[include]\npath = a\n", []string{}},
	{"stops at a header without its bracket", "[x \"y\" \npath = a\n", []string{}},
	{"vertical tab is not space", "[x]\n\vv = 1\n", []string{}},
}

func render(vars []gitVar) []string {
	out := []string{}
	for _, v := range vars {
		if v.set {
			out = append(out, v.name+"="+v.value)
		} else {
			out = append(out, v.name)
		}
	}
	return out
}

func TestParseGitConfig(t *testing.T) {
	t.Parallel()
	for _, c := range gitConfigCases {
		if got := render(parseGitConfig([]byte(c.in))); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: parse(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestParseGitConfigAgreesWithGit: what git itself lists of a file
// (`git config -z --file F --list` prints each variable as it reads it and
// stops at a bad line, as the parser does) equals what the parser finds, for
// the cases above and for files made of random pieces of the syntax. A
// disagreement is an include or a hooks path git follows and agentjail
// does not know of.
func TestParseGitConfigAgreesWithGit(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: the parser is checked against the table only")
	}
	inputs := []string{}
	for _, c := range gitConfigCases {
		inputs = append(inputs, c.in)
	}
	pieces := []string{"[include]", "[includeIf \"gitdir:x\"]", "[core]", "[a.B]", "[ x ]", "[x \"s\\\"\"]", "path", "hooksPath", "Path",
		" ", "\t", "=", " = ", "\"", "\\", "\\\n", "\\t", "\\n", "\\x", "#", ";", "\n", "\r\n", "\r", "a", "b/c", "~/d", "-", "1", "\x00", "]", "["}
	rnd := rand.New(rand.NewPCG(14, 3))
	for range 120 {
		var b strings.Builder
		b.WriteString(pieces[rnd.IntN(3)] + "\n")
		for range 2 + rnd.IntN(14) {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	dir := t.TempDir()
	for i, in := range inputs {
		file := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(file, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(gitBin, "config", "-z", "--no-includes", "--file", file, "--list")
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir}
		out, _ := cmd.Output() // a bad line is exit 128, after what came before it
		want := []string{}
		for _, entry := range bytes.Split(out, []byte{0}) {
			if len(entry) == 0 {
				continue
			}
			name, value, set := bytes.Cut(entry, []byte("\n"))
			if set {
				want = append(want, string(name)+"="+string(value))
			} else {
				want = append(want, string(name))
			}
		}
		if got := render(parseGitConfig([]byte(in))); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("parse(%q) = %q, git lists %q", in, got, want)
		}
	}
}

func TestGitBool(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]bool{
		"true": {true, true}, "YES": {true, true}, "on": {true, true}, "1": {true, true}, "0x10": {true, true}, "2k": {true, true},
		"false": {false, true}, "Off": {false, true}, "": {false, true}, "0": {false, true}, " 0": {false, true},
		"./fsmonitor": {false, false}, "watchman": {false, false},
	} {
		if v, ok := gitBool(gitVar{value: in, set: true}); v != want[0] || ok != want[1] {
			t.Errorf("gitBool(%q) = %v, %v; want %v, %v", in, v, ok, want[0], want[1])
		}
	}
	if v, ok := gitBool(gitVar{}); !v || !ok {
		t.Error("a key without a value is not true")
	}
}

package policy

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestDecodeRefusesHostileText: text that would make the YAML library
// spend gigabytes or exponential time, or a file that holds no profile,
// is refused with one line naming the file (and the place), having
// allocated a bounded amount. Without the checks, the alias case does not
// end.
//
// Not parallel: the allocation count is the process's.
func TestDecodeRefusesHostileText(t *testing.T) {
	rep := strings.Repeat
	// Ten keys of 4000 bytes, one in another, over 40,000 values: each
	// value's path is 40 KB.
	var longKeys strings.Builder
	for i := range 10 {
		fmt.Fprintf(&longKeys, "%s%s:\n", rep(" ", i), rep("k", 4000))
	}
	longKeys.WriteString(rep(" ", 10) + "- [" + rep("x,", 40_000) + "x]\n")
	var aliases strings.Builder
	aliases.WriteString("a0: &a0 {k: v}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&aliases, "a%d: &a%d {<<: [%s]}\n", i, i, strings.TrimSuffix(rep(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	aliases.WriteString("environment:\n  set: *a11\n")
	var indent strings.Builder
	for i := range 200 {
		fmt.Fprintf(&indent, "%sa:\n", rep(" ", i))
	}
	for _, c := range []struct{ name, src, want string }{
		{"empty", "", "p.yaml: cannot decode policy: the profile is empty; a profile is a mapping of keys, at least `extends: tier1`"},
		{"blank", "\n\n  \n", "p.yaml: cannot decode policy: the profile is empty"},
		{"only a comment", "# tier1, some day\n", "p.yaml: cannot decode policy: the profile is empty"},
		{"only a document marker", "---\n", "p.yaml: cannot decode policy: the profile is empty"},
		{"too large", "# " + rep("x", MaxFileSize), fmt.Sprintf("p.yaml: cannot decode policy: %d bytes, more than the 128 KiB a profile may have", MaxFileSize+2)},
		{"unclosed [", rep("[", 40_000), "p.yaml:1:33: cannot decode policy: nested more than 32 levels deep (a profile needs 5); look for an unclosed [ or {"},
		{"unclosed {", "filesystem: " + rep("{", 100_000), "p.yaml:1:44: cannot decode policy: nested more than 32 levels deep"},
		{"nested block sequences", rep("- ", 50_000), "p.yaml:1:65: cannot decode policy: nested more than 32 levels deep"},
		{"indented mappings", indent.String(), "p.yaml:33:34: cannot decode policy: nested more than 32 levels deep"},
		{"key too long", "environment:\n  set:\n    " + rep("K", 5000) + ": v\n", "p.yaml:3:5005: cannot decode policy: a key of 5000 bytes; a key is a field name, a variable name or a path, at most 4096 bytes"},
		{"long keys over many values", longKeys.String(), "cannot decode policy: too many values under keys of up to 4000 bytes for the YAML parser (it keeps each value's path from the root); shorten the keys"},
		{"merge keys over aliases", aliases.String(), "p.yaml:2:16: cannot decode policy: the alias *a0: a profile may not use YAML aliases"},
		{"unquoted pattern", "filesystem:\n  protect:\n    - *.pem\n", `p.yaml:3:8: cannot decode policy: the alias *.pem: a profile may not use YAML aliases; write the value out (quote a pattern that starts with *: "*.pem")`},
		{"explicit key", "? filesystem\n: {}\n", "p.yaml:1:1: cannot decode policy: explicit keys (? key) are not used in a profile; write key: value"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode("p.yaml", []byte(c.src))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.HasPrefix(err.Error(), "p.yaml") || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: Decode error = %v\nwant %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", c.name, err)
		}
		// What these allocate is nearly all the scanner's tokens;
		// unchecked, the deep and long-key ones take gigabytes in the
		// parser. The bound is far from both.
		if n := after.TotalAlloc - before.TotalAlloc; n > 128<<20 {
			t.Errorf("%s: allocated %d MiB", c.name, n>>20)
		}
	}
}

// TestDecodeTakesWhatProfilesWrite: the shape checks refuse none of the
// ways a profile is written: lists at their key's column, flow mappings in
// block ones, quoted patterns, long paths as keys, a generated profile
// near the size cap.
func TestDecodeTakesWhatProfilesWrite(t *testing.T) {
	t.Parallel()
	var big strings.Builder
	big.WriteString("extends: tier1\nfilesystem:\n  read:\n")
	for i := 0; big.Len() < MaxFileSize-100; i++ {
		fmt.Fprintf(&big, "  - /srv/data/projects/some-team/checkout-%06d\n", i)
	}
	long := "/" + strings.Repeat("d", 4000)
	for _, src := range []string{
		"filesystem:\n  write:\n  - /a\n  read:\n  - /b\n  protect:\n  - x\n  deny:\n  - /c\nlimits:\n  wall: 5m\n",
		"filesystem:\n  tmpfs: {/tmp: {size: 1M, mode: \"1777\"}}\n  protect: [\"*.pem\", '**/.env', \"a b\"]\n",
		"filesystem:\n  tmpfs:\n    " + long + ":\n      size: 1M\n",
		"# a comment\n---\nextends: tier1 # another\n...\n",
		big.String(),
	} {
		if _, err := Decode("p.yaml", []byte(src)); err != nil {
			t.Errorf("Decode(%.60q...) = %v", src, err)
		}
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/etc/agentjail/p.yaml": "/etc/agentjail/p.yaml",
		"/srv/café/p.yaml":      "/srv/café/p.yaml",
		"/tmp/a\nb":             `"/tmp/a\nb"`,
		"/tmp/\x1b[8mx":         `"/tmp/\x1b[8mx"`,
		"/tmp/my dir":           `"/tmp/my dir"`,
		"/tmp/\xff":             `"/tmp/\xff"`,
		"/tmp/\u202ex":          `"/tmp/\u202ex"`,
		"":                      `""`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

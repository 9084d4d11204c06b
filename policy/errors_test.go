package policy

import "testing"

// TestPrintable: a line agentjail says on the operator's terminal keeps
// none of the control characters a name the jail chose could carry.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"network: example.com:443 is not allowed": "network: example.com:443 is not allowed",
		"x\x1b]52;c;QlJPS0VS\x07.com":             `x\x1b]52;c;QlJPS0VS\x07.com`,
		"a\nagentjail: fake\r":                    `a\x0aagentjail: fake\x0d`,
		"C1 \u009b31m, UTF-8 é kept":              `C1 \x9b31m, UTF-8 é kept`,
		"raw \x9b31m and \xff":                    `raw \x9b31m and \xff`,
		"d\u202egnp.exe":                          `d\u202egnp.exe`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestShellQuote: a word a POSIX shell reads as itself, whatever it holds.
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/proj/.env":        "/srv/proj/.env",
		"":                      "''",
		"a b":                   "'a b'",
		"$(touch x);y":          "'$(touch x);y'",
		"it's":                  `'it'\''s'`,
		"x\x1b]52;c;e\x07\n'\\": `$'x\x1b]52;c;e\x07\x0a\'\\'`,
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInFileOrder: errors are said as a reader meets them in the file,
// those of a flag after.
func TestInFileOrder(t *testing.T) {
	errs := []error{
		&FieldError{Origin: "p.yaml:5:3", Field: "c", Msg: "c"},
		&FieldError{Origin: "--write", Field: "filesystem.write[0]", Msg: "flag"},
		&FieldError{Origin: "p.yaml:2:9", Field: "b", Msg: "b"},
		&FieldError{Origin: "p.yaml:2:1", Field: "a", Msg: "a"},
	}
	got := InFileOrder(errs).Error()
	want := "p.yaml:2:1: a: a\np.yaml:2:9: b: b\np.yaml:5:3: c: c\n--write: filesystem.write[0]: flag"
	if got != want {
		t.Errorf("InFileOrder:\n%s\nwant:\n%s", got, want)
	}
}

package policy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinels; compare with errors.Is.
var (
	// ErrUnknownProfile: the name is neither a built-in profile nor a file.
	ErrUnknownProfile = errors.New("unknown profile")
	// ErrInvalid: the profile decodes but breaks a rule.
	ErrInvalid = errors.New("invalid policy")
	// ErrSyntax: the profile is not valid YAML for the schema.
	ErrSyntax = errors.New("cannot decode policy")
	// ErrUnreadable: the profile file exists but cannot be read as one
	// (a directory, a device, too large, unreadable).
	ErrUnreadable = errors.New("cannot read profile")
)

// FieldError is one problem with one field. Origin says where the value was
// written ("profiles/tier1.yaml:12:5" or "--write").
type FieldError struct {
	Origin string
	Field  string
	Msg    string
	// Kind is the sentinel the error matches: ErrInvalid when nil (a
	// rule broken), ErrSyntax for a value the decoder could not read.
	Kind error
	// at is where in the file a decoding error was found (Origin's line
	// and column), for decode to cut that entry and go on.
	at position
}

func (e *FieldError) Error() string {
	if e.Origin == "" {
		return fmt.Sprintf("%s: %s", Quote(e.Field), e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Origin, Quote(e.Field), e.Msg)
}

// Is makes a FieldError match its Kind, ErrInvalid by default.
func (e *FieldError) Is(target error) bool {
	if e.Kind != nil {
		return target == e.Kind
	}
	return target == ErrInvalid
}

// Quote returns s as it is when it reads as itself on one line, and
// quoted as Go quotes (%q) when it holds a space, a quote, a backslash or
// anything unprintable: a path with a newline must not split a message
// over lines, one with an escape sequence must not act on the operator's
// terminal.
func Quote(s string) string {
	plain := s != "" && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || strings.ContainsRune(" \"'`\\", r)
	})
	if plain {
		return s
	}
	return strconv.Quote(s)
}

// Printable returns the line l with every control character (C0, DEL and
// C1, a newline too) and every byte that is not UTF-8 written as \xNN,
// and every format character (U+202E, right-to-left override, which
// reorders what the operator reads) as \uNNNN: a line agentjail says that
// carries what the jail chose (a file name, a link's target, a host name)
// stays one line, reads as it is, and no escape sequence in it acts on the
// operator's terminal.
func Printable(l string) string {
	plain := func(r rune) bool {
		return r != utf8.RuneError && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r)
	}
	if utf8.ValidString(l) && !strings.ContainsFunc(l, func(r rune) bool { return !plain(r) }) {
		return l
	}
	var b strings.Builder
	for i := 0; i < len(l); {
		r, n := utf8.DecodeRuneInString(l[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", l[i])
		case unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
		i += max(n, 1)
	}
	return b.String()
}

// ShellQuote returns s as a shell reads it as one word: as it is when it
// holds only characters no shell treats specially, else in single quotes,
// for a command the operator may paste. One that holds what Printable
// escapes is written $'...' with those escapes (bash, zsh, ksh93, dash
// 0.5.12): pasted, it is the name; printed, nothing in it acts on the
// terminal.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	if Printable(s) != s {
		return "$'" + Printable(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// InFileOrder sorts errs as a reader meets them: the errors of one file by
// line and column (the files in the order errs first names them), the
// rest (a flag's, one without a place) after them in the order given. It
// sorts errs itself, and returns it joined.
func InFileOrder(errs []error) error {
	type placed struct {
		err             error
		file, line, col int
	}
	all := make([]placed, len(errs))
	files := map[string]int{}
	for i, err := range errs {
		f, l, c, ok := placeOf(err)
		if !ok {
			all[i] = placed{err: err, file: math.MaxInt}
			continue
		}
		if _, seen := files[f]; !seen {
			files[f] = len(files)
		}
		all[i] = placed{err, files[f], l, c}
	}
	slices.SortStableFunc(all, func(a, b placed) int {
		return cmp.Or(cmp.Compare(a.file, b.file), cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col))
	})
	for i, p := range all {
		errs[i] = p.err
	}
	return errors.Join(errs...)
}

// placeOf is where in which file err was found: a FieldError's origin
// "file:line:col".
func placeOf(err error) (file string, line, col int, ok bool) {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return "", 0, 0, false
	}
	o := fe.Origin
	i := strings.LastIndexByte(o, ':')
	if i < 0 {
		return "", 0, 0, false
	}
	j := strings.LastIndexByte(o[:i], ':')
	if j < 0 {
		return "", 0, 0, false
	}
	line, err1 := strconv.Atoi(o[j+1 : i])
	col, err2 := strconv.Atoi(o[i+1:])
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return o[:j], line, col, true
}

package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxExtends bounds an extends chain; a longer one is almost surely a cycle
// through differently spelled paths.
const maxExtends = 16

// Loader resolves profile references: a built-in name, or a YAML file.
type Loader struct {
	// Builtins holds NAME.yaml files (profiles.FS).
	Builtins fs.FS
	// ReadFile reads a profile file from disk (agentjail's reads only
	// regular files and pipes, at most MaxFileSize bytes). Nil: only
	// built-ins can be loaded.
	ReadFile func(name string) ([]byte, error)
	// Precompiled returns a built-in profile already loaded and merged at
	// build time (profiles.Precompiled, generated Go), sparing the YAML
	// parse on every launch. Nil, or false: the YAML in Builtins is read.
	Precompiled func(name string) (Policy, bool)
}

// IsFile reports whether ref names a file rather than a built-in profile.
func IsFile(ref string) bool {
	return strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml")
}

// Builtins lists the built-in profile names, sorted.
func (l Loader) BuiltinNames() []string {
	var names []string
	entries, _ := fs.ReadDir(l.Builtins, ".")
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() && !strings.HasPrefix(n, "_") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// LoadAll loads every built-in profile from its YAML, shared parents
// included, keyed by name: what `go generate ./profiles` compiles.
func (l Loader) LoadAll() (map[string]Policy, error) {
	l.Precompiled = nil
	out := map[string]Policy{}
	entries, err := fs.ReadDir(l.Builtins, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			// A non-empty chain lets shared parents (_base) load.
			if out[name], err = l.load(name, "", []string{"(all)"}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Load reads a profile and everything it extends, merged. The result has an
// empty Extends and Origins for every field set anywhere in the chain.
func (l Loader) Load(ref string) (Policy, error) {
	return l.load(ref, "", nil)
}

func (l Loader) load(ref, fromDir string, chain []string) (Policy, error) {
	if !IsFile(ref) && l.Precompiled != nil && (len(chain) > 0 || !strings.HasPrefix(ref, "_")) {
		if p, ok := l.Precompiled(ref); ok {
			return p, nil
		}
	}
	name, data, err := l.read(ref, fromDir, len(chain) > 0)
	if err != nil {
		return Policy{}, err
	}
	if i := slices.IndexFunc(chain, func(n string) bool { return sameProfile(n, name) }); i >= 0 {
		var cycle []string
		for _, n := range append(chain[i:], name) {
			if IsFile(n) {
				n = filepath.Clean(n)
			}
			cycle = append(cycle, Quote(n))
		}
		return Policy{}, &cycleError{msg: "extends: cycle: " + strings.Join(cycle, " -> ") + " (remove one of the extends:)"}
	}
	if len(chain) >= maxExtends {
		return Policy{}, fmt.Errorf("%s: extends: chain longer than %d profiles", Quote(name), maxExtends)
	}
	p, err := Decode(Quote(name), data)
	if err != nil {
		return Policy{}, err
	}
	if p.Extends == "" {
		if err := essentials(name, p); IsFile(ref) && err != nil {
			return Policy{}, err
		}
		return p, nil
	}
	dir := ""
	if IsFile(name) {
		dir = filepath.Dir(name)
	}
	parent, err := l.load(p.Extends, dir, append(chain, name))
	if c := (*cycleError)(nil); errors.As(err, &c) {
		// Said once, at the extends: that closes it, and not again by
		// each profile on the way: it names them all.
		if !c.located {
			c.msg, c.located = p.Origins.Of("extends")+": "+c.msg, true
		}
		return Policy{}, c
	}
	if err != nil {
		return Policy{}, fmt.Errorf("%s: extends: %w", p.Origins.Of("extends"), err)
	}
	if err := checkNoLoosening(parent, p); err != nil {
		return Policy{}, err
	}
	m := Merge(parent, p)
	// A description says what its own profile does: a child that says
	// nothing has none (tier1's "10m wall" is not a child's that sets 5m).
	m.Description = p.Description
	return m, nil
}

// cycleError is an extends: chain that comes back to a profile of its
// own; located once the extends: that closes it is named.
type cycleError struct {
	msg     string
	located bool
}

func (e *cycleError) Error() string { return e.msg }

// sameProfile says whether two names a chain holds are one profile: a
// file named ./p.yaml, then p.yaml from its own directory.
func sameProfile(a, b string) bool {
	if IsFile(a) && IsFile(b) {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return a == b
}

// IsBuiltinOrigin reports whether origin (an Origins value) points into a
// built-in profile, shared parents included, rather than at a flag or a
// profile file of the operator's. A file of the operator's at a relative
// path such as profiles/tier1.yaml reads the same; it is taken for the
// built-in.
func (l Loader) IsBuiltinOrigin(origin string) bool {
	file, _, _ := strings.Cut(origin, ":")
	ref, ok := strings.CutPrefix(file, "profiles/")
	if !ok || strings.ContainsRune(ref, '/') {
		return false
	}
	_, err := fs.Stat(l.Builtins, ref)
	return err == nil && strings.HasSuffix(ref, ".yaml")
}

// read returns the display name and contents of a profile reference.
// Shared parents (names starting with _) may only be extended.
func (l Loader) read(ref, fromDir string, extending bool) (string, []byte, error) {
	if !IsFile(ref) {
		data, err := fs.ReadFile(l.Builtins, ref+".yaml")
		if err != nil || strings.HasPrefix(ref, "_") && !extending {
			return "", nil, fmt.Errorf("%w %q: built-in profiles are %s; a file path must contain a / or end in .yaml",
				ErrUnknownProfile, ref, strings.Join(l.BuiltinNames(), ", "))
		}
		return path.Join("profiles", ref+".yaml"), data, nil
	}
	name := ref
	if fromDir != "" && !filepath.IsAbs(ref) {
		name = filepath.Join(fromDir, ref)
	}
	if l.ReadFile == nil {
		return "", nil, fmt.Errorf("%w %q: profile files cannot be read here", ErrUnknownProfile, ref)
	}
	data, err := l.ReadFile(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("%w: %s: no such file (built-in profiles are %s)", ErrUnknownProfile, Quote(name), strings.Join(l.BuiltinNames(), ", "))
		}
		return "", nil, fmt.Errorf("%s: %w: %w", Quote(name), ErrUnreadable, err)
	}
	return name, data, nil
}

// Decode parses one profile document strictly: unknown keys, wrong types,
// duplicate keys and a second document are errors naming file:line:col.
func Decode(name string, data []byte) (p Policy, err error) {
	// goccy/go-yaml 1.19.2 dereferences nil on some malformed input, such
	// as an empty tagged sequence (`write: !!seq`, goccy/go-yaml#735, fixed
	// upstream after the release); FuzzLoad finds such inputs. A bad profile
	// must end in an error naming the file, never in a panic.
	defer func() {
		if r := recover(); r != nil {
			p, err = Policy{}, fmt.Errorf("%s: %w: the YAML decoder failed on this file (%v); look for an explicit tag (!!seq, !x) or a stray bracket and write the value plainly", name, ErrSyntax, r)
		}
	}()
	return decode(name, data)
}

func decode(name string, data []byte) (Policy, error) {
	if len(data) > MaxFileSize {
		return Policy{}, fmt.Errorf("%s: %w: %d bytes, more than the %d KiB a profile may have", name, ErrSyntax, len(data), MaxFileSize>>10)
	}
	tokens, err := scan(name, data)
	if err != nil {
		return Policy{}, err
	}
	file, err := parser.Parse(tokens, 0)
	if err != nil {
		return Policy{}, decodeError(name, data, err)
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	var p Policy
	switch len(docs) {
	case 0:
		// An empty file is more likely a generator that failed than a
		// wish for a jail with no protection at all.
		return Policy{}, fmt.Errorf("%s: %w: the profile is empty; a profile is a mapping of keys, at least `extends: tier1`", name, ErrSyntax)
	case 1:
	default:
		pos := docs[1].Body.GetToken().Position
		if docs[1].Start != nil {
			pos = docs[1].Start.Position
		}
		return Policy{}, fmt.Errorf("%s:%d:%d: %w: a profile is one YAML document; remove everything from the second --- on", name, pos.Line, pos.Column, ErrSyntax)
	}
	if docs[0].Body.Type() != ast.MappingType {
		pos := docs[0].Body.GetToken().Position
		return Policy{}, fmt.Errorf("%s:%d:%d: %w: a profile is a mapping of keys (extends:, filesystem:, ...), not %s", name, pos.Line, pos.Column, ErrSyntax, docs[0].Body.Type())
	}
	// A number in quotes is a string, which the decoder would take for
	// an integer field ("100" for pids) where `agentjail schema`, and an
	// editor that checks with it, refuses one: refused here too.
	var errs []error
	for _, fe := range quotedNumbers(name, docs[0].Body) {
		errs = append(errs, fe)
		// Exactly: two in one list, the first took the list with it.
		dropFieldAt(docs[0], fe.Field, fe.at, true)
	}
	// The decoder stops at the first value it cannot take. To report every
	// one at once, each is cut from the tree and the decoding retried: the
	// positions and paths of the rest do not move.
	for range maxDecodeErrors {
		err := yaml.NodeToValue(docs[0].Body, &p, yaml.Strict())
		if err == nil {
			break
		}
		p = Policy{}
		var fe *FieldError
		if !errors.As(fieldError(name, docs[0].Body, err), &fe) {
			errs = append(errs, decodeError(name, data, err))
			break
		}
		errs = append(errs, fe)
		if !dropField(docs[0], fe.Field, fe.at) {
			break
		}
	}
	if len(errs) > 0 {
		return Policy{}, InFileOrder(errs)
	}
	p.Origins = originsOf(name, docs[0].Body)
	return p, nil
}

// quotedNumbers returns an error for each integer field given a string.
func quotedNumbers(name string, doc ast.Node) []*FieldError {
	var out []*FieldError
	walkFields(doc, func(path string, key, value ast.Node) {
		// Only Go's own integers: a type of ours (Size, Duration, Mode,
		// Rlimit) takes its strings ("1GiB", "10m", "0755", "unlimited").
		t := typeAt(path)
		if t == nil || t.PkgPath() != "" || value == nil || value.Type() != ast.StringType {
			return
		}
		tok := value.GetToken()
		if tok.Type != token.DoubleQuoteType && tok.Type != token.SingleQuoteType {
			return // a word: the decoder's own mismatch
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(tok.Value), 0, 64); err != nil {
			return
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			pos := tok.Position
			out = append(out, &FieldError{Origin: fmt.Sprintf("%s:%d:%d", name, pos.Line, pos.Column), Field: path,
				Msg: mismatchMsg(path, value) + " (a number in quotes is a string: write it without them)", Kind: ErrSyntax, at: position{pos.Line, pos.Column}})
		}
	})
	return out
}

// maxDecodeErrors bounds how many wrong values one decoding reports.
const maxDecodeErrors = 32

// dropField removes the mapping entry at path from the document (for an
// entry of a list, the whole list: removing one element would renumber the
// rest). It reports whether anything was removed.
// The entry is the one holding the error's position (at) where one does:
// two entries may share a path string (a top-level key "filesystem.x" and
// x under filesystem).
func dropField(doc *ast.DocumentNode, path string, at position) bool {
	return dropFieldAt(doc, path, at, false)
}

// dropFieldAt is dropField; with exactOnly, only an entry that holds at
// is removed (none, where one removed before held it).
func dropFieldAt(doc *ast.DocumentNode, path string, at position, exactOnly bool) bool {
	for _, exact := range []bool{true, false} {
		if !exact && exactOnly {
			break
		}
		for p := path; p != ""; p = parentPath(p) {
			if removeEntry(doc, p, func(v *ast.MappingValueNode) bool { return !exact || holds(v, at) }) {
				return true
			}
		}
	}
	return false
}

// holds reports whether the entry's key or any node under it starts at at.
func holds(v *ast.MappingValueNode, at position) bool {
	found := false
	walkFields(v, func(_ string, key, value ast.Node) {
		for _, n := range []ast.Node{key, value} {
			if n != nil && n.GetToken() != nil {
				pos := n.GetToken().Position
				found = found || position{pos.Line, pos.Column} == at
			}
		}
	})
	return found
}

func removeEntry(doc *ast.DocumentNode, path string, match func(*ast.MappingValueNode) bool) bool {
	var walk func(prefix string, n ast.Node, replace func(ast.Node)) bool
	// entry looks at one key: value; drop takes it out of its mapping.
	entry := func(prefix string, v *ast.MappingValueNode, drop func()) bool {
		p := joinKey(prefix, v.Key.String())
		if p == path && match(v) {
			drop()
			return true
		}
		return walk(p, v.Value, func(x ast.Node) { v.Value = x })
	}
	walk = func(prefix string, n ast.Node, replace func(ast.Node)) bool {
		switch n := n.(type) {
		case *ast.MappingNode:
			for i, v := range n.Values {
				if entry(prefix, v, func() { n.Values = slices.Delete(n.Values, i, i+1) }) {
					return true
				}
			}
		case *ast.MappingValueNode: // a mapping of one entry, as goccy/go-yaml may build it
			return entry(prefix, n, func() { replace(ast.Null(n.Key.GetToken())) })
		case *ast.SequenceNode:
			for i, v := range n.Values {
				if v != nil && walk(prefix+"["+strconv.Itoa(i)+"]", v, func(x ast.Node) { n.Values[i] = x }) {
					return true
				}
			}
		}
		return false
	}
	return walk("", doc.Body, func(x ast.Node) { doc.Body = x })
}

func decodeError(name string, data []byte, err error) error {
	var pe *PosError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d:%d: %w: %s", name, pe.Line, pe.Column, ErrSyntax, pe.Msg)
	}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		pos := ye.GetToken().Position
		hint := decodeHint(ye.GetMessage())
		if v := flowVariable(data, pos.Line); v != "" {
			hint = fmt.Sprintf(" (inside [ ] or { } YAML reads the { of ${...} as a mapping: quote the value, %q)", v)
		}
		return fmt.Errorf("%s:%d:%d: %w: %s%s", name, pos.Line, pos.Column, ErrSyntax, ye.GetMessage(), hint)
	}
	return fmt.Errorf("%s: %w: %v", name, ErrSyntax, err)
}

// unquotedVariable is a ${NAME} path as it may stand unquoted in a flow
// collection, up to the next indicator.
var unquotedVariable = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[\s\[,])(\$\{[A-Za-z_]*\}[^\s,\[\]{}"']*)`)
})

// flowVariable returns the first unquoted ${...} value on line (1-based)
// of data when the line holds a flow collection, or "".
func flowVariable(data []byte, line int) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) || !strings.ContainsAny(lines[line-1], "[{") {
		return ""
	}
	if m := unquotedVariable().FindStringSubmatch(lines[line-1]); m != nil {
		return m[1]
	}
	return ""
}

// decodeHint turns the YAML library's messages into a fix.
func decodeHint(msg string) string {
	switch {
	case strings.Contains(msg, "unknown field"):
		return " (see `agentjail schema` for the keys a profile may use)"
	case strings.Contains(msg, "already defined"):
		return " (a key may appear once per mapping; merge the two)"
	case strings.Contains(msg, "cannot unmarshal"):
		return " (see `agentjail schema` for the expected type)"
	case strings.Contains(msg, "'\t'"):
		return " (YAML indents with spaces, never tabs: replace the tab)"
	}
	return ""
}

// checkNoLoosening refuses a child that would weaken what its parent
// enforces. Lists only grow in a merge, so only scalars need a check.
func checkNoLoosening(parent, child Policy) error {
	var errs []error
	refuse := func(field, msg string) {
		errs = append(errs, ErrorAt(child, field, msg+"; a child profile cannot loosen the profile it extends"))
	}
	if pd, cd := parent.Filesystem.ProtectDepth, child.Filesystem.ProtectDepth; pd != nil && cd != nil && *cd < *pd {
		refuse("filesystem.protect_depth", fmt.Sprintf("%d is lower than the %d of the profile it extends", *cd, *pd))
	}
	if parent.InnerSandbox == InnerSealed && child.InnerSandbox == InnerFree {
		refuse("inner_sandbox", "free, but the profile it extends is sealed")
	}
	if parent.Filesystem.Proc == ProcFresh && child.Filesystem.Proc == ProcFreshOrBind {
		refuse("filesystem.proc", "fresh-or-bind, but the profile it extends insists on a fresh /proc")
	}
	if isFalse(child.Seccomp.Default) && !isFalse(parent.Seccomp.Default) {
		refuse("seccomp.default", "false, but the profile it extends applies the default filter")
	}
	// A mode that is none of the three is the validator's to report.
	if c, p := child.Network.Mode, parent.Network.Mode; c != "" && p != "" && netRank[c] < netRank[p] && slices.Contains([]string{NetHost, NetProxy, NetNone}, c) {
		refuse("network.mode", fmt.Sprintf("%s, but the profile it extends has %s", c, p))
	}
	if isTrue(child.Filesystem.AcceptProtectedSymlinks) && isFalse(parent.Filesystem.AcceptProtectedSymlinks) {
		refuse("filesystem.accept_protected_symlinks", "true, but the profile it extends refuses symlinked protected paths")
	}
	if isFalse(child.Filesystem.Home.Private) && isTrue(parent.Filesystem.Home.Private) {
		refuse("filesystem.home.private", "false, but the profile it extends hides the host home")
	}
	return InFileOrder(errs)
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

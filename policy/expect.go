package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// The YAML library reports a value of the wrong type in terms of Go
// ("cannot unmarshal string into Go struct field Home.Private of type
// bool"); a profile's author needs the field, what it takes and an example.
// fieldError finds the field of a decoding error from its position
// (fieldsAt) and says that, from the field's Go type.

// enums are the string fields that take one of a few words.
var enums = map[string][]string{
	"inner_sandbox":   {InnerFree, InnerSealed},
	"filesystem.base": {BaseHost, BaseMinimal},
	"filesystem.proc": {ProcFresh, ProcFreshOrBind},
	"network.mode":    {NetHost, NetNone, NetProxy},
}

// samples are example values of string fields and of map keys, for the
// examples in messages.
var samples = map[string]string{
	"extends":                "tier1",
	"description":            "my profile",
	"user":                   "builder",
	"filesystem.read":        "/opt/tools",
	"filesystem.write":       "${PWD}",
	"filesystem.protect":     ".env",
	"filesystem.deny":        "~/.aws",
	"filesystem.credentials": "~/.ssh",
	"filesystem.tmpfs":       "/tmp",
	"network.allow":          "api.example.com",
	"environment.allow":      "LANG",
	"environment.set":        "NAME",
	"environment.set[]":      "value",
	"environment.unset":      "CLAUDECODE",
	"seccomp.files":          "/etc/agentjail/extra.json",
	"limits.rlimits":         "nofile",
}

// retired are keys a profile may no longer use: why, and the fix. A
// profile that still has one is refused, not silently run otherwise.
var retired = map[string]string{
	"claude.write_back": "agentjail no longer writes a login back to the operator's credentials (whatever the agent wrote there would become the operator's login); remove the key",
	"namespaces":        "network.mode replaces namespaces.net: write `network: {mode: none}` for a jail without a network (what net: true gave), or `network: {mode: proxy}` for egress through agentjail's broker (docs/network.md)",
}

var (
	typeDuration = reflect.TypeFor[Duration]()
	typeSize     = reflect.TypeFor[Size]()
	typeMode     = reflect.TypeFor[Mode]()
	typeRlimit   = reflect.TypeFor[Rlimit]()
	typeMemory   = reflect.TypeFor[Memory]()
)

// fieldError rewrites a decoding error at a position of doc as an error on
// the field there (*FieldError, matching ErrSyntax), or returns nil when
// it has no position or no field is there.
func fieldError(name string, doc ast.Node, err error) error {
	var (
		line, col int
		mismatch  bool // a value of the wrong type
		msg       string
		pe        *PosError
		te        *yaml.TypeError
		ue        *yaml.UnexpectedNodeTypeError
		oe        *yaml.OverflowError
		ye        yaml.Error
	)
	switch {
	case errors.As(err, &pe):
		line, col, mismatch, msg = pe.Line, pe.Column, pe.Mismatch, pe.Msg
	case errors.As(err, &te) && te.Token != nil:
		line, col, mismatch = te.Token.Position.Line, te.Token.Position.Column, true
	case errors.As(err, &ue) && ue.Token != nil:
		line, col, mismatch = ue.Token.Position.Line, ue.Token.Position.Column, true
	case errors.As(err, &oe) && oe.Token != nil:
		line, col, msg = oe.Token.Position.Line, oe.Token.Position.Column, fmt.Sprintf("%s is out of range", oe.SrcNum)
	case errors.As(err, &ye) && ye.GetToken() != nil:
		pos := ye.GetToken().Position
		line, col, msg = pos.Line, pos.Column, ye.GetMessage()
	default:
		return nil
	}
	values, keys := fieldsAt(doc)
	at := position{line, col}
	path, onKey := values[at], false
	if k, ok := keys[at]; ok && (path == "" || !mismatch) {
		path, onKey = k, true
	}
	if path == "" {
		return nil
	}
	origin := fmt.Sprintf("%s:%d:%d", name, line, col)
	var unknown *yaml.UnknownFieldError
	switch {
	case mismatch && !onKey:
		msg = mismatchMsg(path, nodeAt(doc, path))
	case errors.As(err, &unknown):
		msg = unknownMsg(path)
	case msg != "":
		msg += decodeHint(msg)
	}
	return &FieldError{Origin: origin, Field: path, Msg: msg, Kind: ErrSyntax, at: at}
}

// mismatchMsg says what the field at path takes, what it got instead, and
// gives an example.
func mismatchMsg(path string, got ast.Node) string {
	t := typeAt(path)
	if t == nil {
		return "a value of the wrong type (see `agentjail schema`)"
	}
	key := lastKey(path)
	example := key + ": " + sample(t, path)
	if key == "" {
		example = "- " + sample(t, path)
	}
	return fmt.Sprintf("expected %s, got %s; e.g. `%s`", describe(t, path), kindOf(got), example)
}

// unknownMsg names the keys the mapping around path takes, or says why a
// retired key went.
func unknownMsg(path string) string {
	if why, ok := retired[path]; ok {
		return "removed: " + why
	}
	parent := parentPath(path)
	where := "a profile"
	if parent != "" {
		where = parent
	}
	keys := "its keys"
	if t := typeAt(parent); t != nil && t.Kind() == reflect.Struct {
		keys = strings.Join(fieldNames(t), ", ")
	}
	return fmt.Sprintf("unknown key; %s takes %s (see `agentjail schema`)", where, keys)
}

// typeAt is the Go type of the field at path ("filesystem.tmpfs[/tmp].size"),
// pointers removed; nil when there is none.
func typeAt(path string) reflect.Type {
	t := reflect.TypeFor[Policy]()
	for rest := path; rest != ""; {
		var seg string
		indexed := rest[0] == '['
		if indexed {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil
			}
			rest = rest[end+1:]
		} else {
			rest = strings.TrimPrefix(rest, ".")
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			seg, rest = rest[:end], rest[end:]
		}
		switch {
		case indexed && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map):
			t = t.Elem()
		case !indexed && t.Kind() == reflect.Struct:
			f, ok := fieldByKey(t, seg)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if n := yamlName(t.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// describe says in words what a value of type t at path is.
func describe(t reflect.Type, path string) string {
	switch t {
	case typeDuration:
		return "a duration (90s, 10m or a number of seconds)"
	case typeSize:
		return "a size (64MiB, 1G or a number of bytes)"
	case typeMode:
		return `an octal mode (such as "0700")`
	case typeRlimit:
		return "a number, a size or unlimited"
	case typeMemory:
		return "a size or a percentage of the host's RAM"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		if words, ok := enums[path]; ok {
			return "one of " + strings.Join(words, ", ")
		}
		return "a string"
	case reflect.Int:
		return "a whole number"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a mapping"
	case reflect.Struct:
		return "a mapping with the keys " + strings.Join(fieldNames(t), ", ")
	}
	return t.String()
}

// sample writes an example value of type t at path, in flow style.
func sample(t reflect.Type, path string) string {
	switch t {
	case typeDuration:
		return "10m"
	case typeSize:
		return "64MiB"
	case typeMode:
		return `"0700"`
	case typeRlimit:
		return "1024"
	case typeMemory:
		return "8GiB"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true"
	case reflect.String:
		if words, ok := enums[path]; ok {
			return words[0]
		}
		base := path
		if strings.HasSuffix(path, "]") {
			// A list's entry takes its list's sample; a map's value, the
			// map's value sample (the map's own is a key).
			if base = parentPath(path); isMapField(base) {
				base += "[]"
			}
		}
		if s, ok := samples[base]; ok {
			return s
		}
		return "text"
	case reflect.Int:
		return "3"
	case reflect.Slice:
		return "[" + inFlow(sample(t.Elem(), path+"[0]")) + "]"
	case reflect.Map:
		key := samples[path]
		if key == "" {
			key = "name"
		}
		return "{" + key + ": " + inFlow(sample(t.Elem(), path+"["+key+"]")) + "}"
	case reflect.Struct:
		f := t.Field(0)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		return "{" + yamlName(f) + ": " + sample(ft, joinPath(path, yamlName(f))) + "}"
	}
	return "..."
}

// lastKey is the last key of a field path ("net" of "namespaces.net",
// "/tmp" of "filesystem.tmpfs[/tmp]"), "" for a list entry.
func lastKey(path string) string {
	parent := parentPath(path)
	rest := strings.TrimPrefix(path[len(parent):], ".")
	if strings.HasPrefix(rest, "[") {
		if isMapField(parent) {
			return strings.Trim(rest, "[]")
		}
		return ""
	}
	return rest
}

// nodeAt finds the value at path in doc, nil when there is none.
func nodeAt(doc ast.Node, path string) ast.Node {
	var found ast.Node
	walkFields(doc, func(p string, _, value ast.Node) {
		if p == path && found == nil {
			found = value
		}
	})
	return found
}

// kindOf names a YAML value's kind as a profile's author knows it.
func kindOf(n ast.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Type() {
	case ast.StringType, ast.LiteralType:
		return "a string"
	case ast.IntegerType, ast.FloatType, ast.InfinityType, ast.NanType:
		return "a number"
	case ast.BoolType:
		return "true or false"
	case ast.NullType:
		return "nothing (null)"
	case ast.SequenceType:
		return "a list"
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	case ast.TagType:
		return "a tagged value"
	case ast.AnchorType, ast.AliasType:
		return "an alias"
	}
	return strings.ToLower(n.Type().String())
}

// inFlow quotes a sample scalar that YAML would not read as one inside
// [ ] or { }: ${PWD} there starts a mapping.
func inFlow(s string) string {
	if strings.ContainsAny(s, "{}[],") && !strings.HasPrefix(s, "[") && !strings.HasPrefix(s, "{") {
		return strconv.Quote(s)
	}
	return s
}

package policy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Origins maps a field path to where its value came from: "file:line:col"
// for a profile, the flag name ("--write") for a command-line value.
//
// Paths use the YAML names: "limits.wall", "filesystem.write[2]",
// "filesystem.tmpfs[/tmp].size".
type Origins map[string]string

// Of returns the origin of path, or of its nearest ancestor that has one.
func (o Origins) Of(path string) string {
	for p := path; p != ""; p = parentPath(p) {
		if s, ok := o[p]; ok {
			return s
		}
	}
	return ""
}

// FieldName is the path of field as the file (or flag) that set it has
// it, for messages beside its origin (Policy.Fields).
func (p Policy) FieldName(field string) string {
	for a := field; a != ""; a = parentPath(a) {
		if local, ok := p.Fields[a]; ok {
			return local + field[len(a):]
		}
	}
	return field
}

// ErrorAt is a FieldError of p's field, with its origin and its name there.
func ErrorAt(p Policy, field, msg string) *FieldError {
	return &FieldError{Origin: p.Origins.Of(field), Field: p.FieldName(field), Msg: msg}
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// originsOf records the position of every mapping value and sequence entry
// of a document, keyed by field path. A mapping value is pointed at by its
// key, the better pointer for a value that spans lines.
func originsOf(name string, node ast.Node) Origins {
	o := Origins{}
	walkFields(node, func(path string, key, value ast.Node) {
		at := value
		if key != nil {
			at = key
		}
		pos := at.GetToken().Position
		o[path] = fmt.Sprintf("%s:%d:%d", name, pos.Line, pos.Column)
	})
	return o
}

// position is a line and column of a YAML document.
type position struct{ line, col int }

// fieldsAt inverts originsOf: it maps the position of each value, and of
// each key, to its field path, so that a decoding error the YAML library
// reports at a position can name the field. The outermost field wins a
// shared position.
func fieldsAt(node ast.Node) (values, keys map[position]string) {
	values, keys = map[position]string{}, map[position]string{}
	record := func(m map[position]string, n ast.Node, path string) {
		pos := n.GetToken().Position
		if _, ok := m[position{pos.Line, pos.Column}]; !ok {
			m[position{pos.Line, pos.Column}] = path
		}
	}
	walkFields(node, func(path string, key, value ast.Node) {
		if value != nil {
			record(values, value, path)
		}
		if key != nil {
			record(keys, key, path)
		}
	})
	return values, keys
}

// walkFields calls fn for every mapping value (with its key) and sequence
// entry (key nil) of a document, parents before children, with its field
// path.
func walkFields(node ast.Node, fn func(path string, key, value ast.Node)) {
	var walk func(path string, n ast.Node)
	walk = func(path string, n ast.Node) {
		switch n := n.(type) {
		case nil:
		case *ast.DocumentNode:
			walk(path, n.Body)
		case *ast.MappingNode:
			for _, v := range n.Values {
				walk(path, v)
			}
		case *ast.MappingValueNode:
			p := joinKey(path, n.Key.String())
			fn(p, n.Key, n.Value)
			walk(p, n.Value)
		case *ast.SequenceNode:
			for i, v := range n.Values {
				if v == nil {
					continue
				}
				p := path + "[" + strconv.Itoa(i) + "]"
				fn(p, nil, v)
				walk(p, v)
			}
		}
	}
	if node != nil {
		walk("", node)
	}
}

// joinKey extends a path by a mapping key. Keys of user maps (tmpfs mount
// points, environment names) are written as [key], struct fields as .key.
func joinKey(path, key string) string {
	key = strings.Trim(key, `"'`)
	switch {
	case path == "":
		return key
	case isMapField(path):
		return path + "[" + key + "]"
	}
	return path + "." + key
}

// isMapField reports whether path names a map-typed field (whose keys are
// user data, not field names).
func isMapField(path string) bool { return mapFields()[path] }

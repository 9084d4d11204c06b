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
// of a document, keyed by field path.
func originsOf(name string, node ast.Node) Origins {
	o := Origins{}
	var walk func(path string, n ast.Node)
	walk = func(path string, n ast.Node) {
		if n == nil {
			return
		}
		if path != "" {
			pos := n.GetToken().Position
			o[path] = fmt.Sprintf("%s:%d:%d", name, pos.Line, pos.Column)
		}
		switch n := n.(type) {
		case *ast.DocumentNode:
			walk(path, n.Body)
		case *ast.MappingNode:
			for _, v := range n.Values {
				walk(joinKey(path, v.Key.String()), v.Value)
				// The key's own position is the better pointer for a value
				// that spans lines (a mapping or a sequence).
				pos := v.Key.GetToken().Position
				o[joinKey(path, v.Key.String())] = fmt.Sprintf("%s:%d:%d", name, pos.Line, pos.Column)
			}
		case *ast.MappingValueNode:
			walk(joinKey(path, n.Key.String()), n.Value)
			pos := n.Key.GetToken().Position
			o[joinKey(path, n.Key.String())] = fmt.Sprintf("%s:%d:%d", name, pos.Line, pos.Column)
		case *ast.SequenceNode:
			for i, v := range n.Values {
				walk(path+"["+strconv.Itoa(i)+"]", v)
			}
		}
	}
	walk("", node)
	return o
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
func isMapField(path string) bool { return mapFields[path] }

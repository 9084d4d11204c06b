package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/agentjail/agentjail/internal/testutil"
)

// TestSchemaMatchesStructs keeps schema.json and the Policy struct in step:
// every YAML key has a schema property and every property a field.
func TestSchemaMatchesStructs(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(SchemaJSON, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(typ reflect.Type, node map[string]any, path string)
	walk = func(typ reflect.Type, node map[string]any, path string) {
		props, _ := node["properties"].(map[string]any)
		var fields []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			fields = append(fields, name)
			sub, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("schema lacks %s%s", path, name)
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() && sub["properties"] != nil {
				walk(ft, sub, path+name+".")
			}
		}
		for name := range props {
			if !slices.Contains(fields, name) {
				t.Errorf("schema has %s%s, which no field decodes", path, name)
			}
		}
	}
	walk(reflect.TypeFor[Policy](), doc, "")
}

// TestBuiltinProfilesMatchSchema validates every shipped profile, as an
// editor would, against the printed schema.
func TestBuiltinProfilesMatchSchema(t *testing.T) {
	t.Parallel()
	s := testutil.CompileSchema(t, SchemaJSON)
	files, _ := filepath.Glob("../profiles/*.yaml")
	if len(files) == 0 {
		t.Fatal("no profiles found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		if err := testutil.Validate(s, v); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// And the schema refuses what Decode refuses.
	for _, bad := range []string{"bogus: 1\n", "inner_sandbox: loose\n", "filesystem:\n  tmpfs:\n    /tmp: {mode: '1777'}\n", "limits:\n  wall: soon\n"} {
		var v any
		if err := yaml.Unmarshal([]byte(bad), &v); err != nil {
			t.Fatal(err)
		}
		if testutil.Validate(s, v) == nil {
			t.Errorf("schema accepts %q", strings.TrimSpace(bad))
		}
	}
}

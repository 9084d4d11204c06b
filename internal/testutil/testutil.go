// Package testutil holds what agentjail's tests share: the one place that
// decides whether a test needing root or bubblewrap runs or skips (and
// says why), and JSON Schema checking.
//
// It is imported by tests only.
package testutil

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// RequireRoot skips t unless it runs as root. `make test` runs as root, so
// there these tests run.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root (make test runs as root)")
	}
}

// RequireBwrap skips t unless bubblewrap is installed, and returns its path.
func RequireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("needs bubblewrap (make deps installs it)")
	}
	return p
}

// CompileSchema compiles a JSON Schema document.
func CompileSchema(t testing.TB, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return s
}

// Validate checks a JSON document (or any value that marshals to one)
// against s and returns the validation error.
func Validate(s *jsonschema.Schema, v any) error {
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

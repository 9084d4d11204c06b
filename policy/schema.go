package policy

import _ "embed"

// SchemaJSON is the JSON Schema (draft 2020-12) of a profile, printed by
// `agentjail schema` for editors. schema_test.go keeps it in step with the
// Policy struct.
//
//go:embed schema.json
var SchemaJSON []byte

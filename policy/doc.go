// Package policy is agentjail's policy language: the plain structs a YAML
// profile decodes into, strict decoding with file:line:column positions,
// `extends:` merging, path-variable expansion and Validate.
//
// It must not touch the process or the kernel. What it needs to know about the
// machine (files, users, the working directory) is handed in by the caller, so
// everything here is a pure function that tests run on fake inputs.
package policy

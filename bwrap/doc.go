// Package bwrap knows the bubblewrap binary agentjail drives: its version,
// which flags that version supports, and how to find it. Detection runs
// `bwrap --version` at most once per installed binary and caches the answer.
//
// It must not build argument lists (that is mounts/) or start sandboxes
// (that is supervise/).
package bwrap

//go:build !linux || !cgo

package sigstart

// Ignored is the set of signals that were ignored when the process
// started: without cgo nothing records it before the Go runtime starts,
// and agentjail init keeps what the runtime itself keeps (SIGHUP, SIGINT).
func Ignored() uint64 { return 0 }

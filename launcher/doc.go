// Package launcher is agentjail's resident launcher: a daemon (Serve) that
// keeps agentjail processes started ahead of need (workers), each waiting
// on the launcher's Unix socket for one request from agentjail-run (its
// descriptors, directory, umask, resource limits, arguments and
// environment: protocol.go), which Take turns into this process's own
// before cmd/agentjail runs it as `agentjail run` would have run cold. A
// launch then costs neither a Go program's start nor its exit.
//
// It knows processes and sockets, never policies or runs: what a worker
// does with its request is cmd/agentjail's.
package launcher

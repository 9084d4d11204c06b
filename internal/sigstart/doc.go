// Package sigstart records which signals were ignored when agentjail
// started, before the Go runtime put its handlers over them (it keeps an
// inherited SIG_IGN for SIGHUP and SIGINT alone, which os/signal.Ignored
// reports). `agentjail init` hands the set on, so that its command
// inherits them ignored, as nohup(1) and a shell's background job mean
// (a non-interactive shell's `cmd &` ignores SIGINT and SIGQUIT). It is
// cgo: a C constructor runs before the runtime starts. Only cmd/agentjail
// imports it; agentjail-init, static, is handed the set as a flag.
package sigstart

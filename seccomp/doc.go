// Package seccomp turns a policy's system-call rules into classic BPF
// programs that bubblewrap loads with --add-seccomp-fd.
//
// Filters are agentjail's own types (Filter, Rule, Cond). They come from
// two places: the built-in filter of every profile (Builtin: the dangerous
// part of Docker's default profile, and for sealed profiles namespace
// creation and the mount APIs), and Docker/OCI seccomp JSON, converted once
// at the edge by Import (Export goes back). Nothing else in agentjail sees
// runtime-spec's types.
//
// Compile uses libseccomp through cgo (the one other cgo in agentjail is
// internal/sigstart's constructor); builds without cgo compile nothing and
// fail only when a filter is asked for.
// Tests run the compiled programs through golang.org/x/net/bpf's VM, so the
// rules are checked without root; a few kernel tests prove the kernel
// agrees.
//
// This package does not launch anything: it hands back BPF bytes and a
// sealed memfd holding them.
package seccomp

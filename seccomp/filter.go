package seccomp

import (
	"runtime"
	"slices"
)

// Filter is one seccomp filter: one BPF program. bwrap loads every filter
// it is given; the kernel runs them all on each system call and the
// strictest answer wins (seccomp(2), "If multiple filters exist, ... the
// return value with the highest precedence").
type Filter struct {
	// Source says where the filter came from, for error messages: a file
	// name, or "built-in filter (inner_sandbox: free)".
	Source string
	// Default is the answer for system calls no rule matches.
	Default Action
	// Arches are architectures besides the native one whose system calls
	// the rules also govern. A call made through any other architecture
	// (i386 `int 0x80` on amd64, x32) kills the process.
	Arches []Arch
	// Rules are tried for their system call; the first rule whose
	// conditions all hold decides (libseccomp builds the decision tree).
	Rules []Rule
}

// Rule gives an action to one or more system calls, optionally only when
// every condition on their arguments holds.
type Rule struct {
	Syscalls []string
	Action   Action
	Conds    []Cond
	// Origin locates the rule in its source ("syscalls[3]"), for errors.
	// It is not part of the rule's meaning.
	Origin string
}

// Action is what the kernel does with a matching system call.
type Action struct {
	Kind Kind
	// Errno is the error Errno returns, or the message Trace passes to a
	// tracer.
	Errno uint16
}

// Kind is an action's kind, in the kernel's order of precedence (weakest
// first): seccomp(2) "SECCOMP_RET_KILL_PROCESS ... SECCOMP_RET_ALLOW".
type Kind uint8

const (
	Allow Kind = iota
	Log
	Trace
	Errno
	Trap
	KillThread
	KillProcess
)

// stricter reports whether a wins over b when both filters answer.
func (a Action) stricter(b Action) bool { return a.Kind > b.Kind }

// Cond compares one system-call argument.
type Cond struct {
	Arg uint // 0..5
	Op  Op
	// Value is compared with the argument; for MaskedEq it is the mask
	// (the Docker/runc convention: `value` is the mask, `valueTwo` the
	// datum).
	Value uint64
	// Datum is MaskedEq's right-hand side: arg & Value == Datum.
	Datum uint64
}

// Op is a comparison. Arguments are compared as 64-bit values.
type Op uint8

const (
	NotEqual Op = iota + 1
	Less
	LessOrEqual
	Equal
	GreaterOrEqual
	Greater
	MaskedEqual
)

// Arch is an architecture by libseccomp's name ("amd64", "x86", "arm64").
type Arch string

// Native is the architecture agentjail was built for, in libseccomp's
// terms. Unknown GOARCHes map to "" and Compile refuses them.
func Native() Arch { return goarchToArch[runtime.GOARCH] }

var goarchToArch = map[string]Arch{
	"amd64": "amd64", "386": "x86", "arm64": "arm64", "arm": "arm",
	"ppc64le": "ppc64le", "ppc64": "ppc64", "s390x": "s390x", "riscv64": "riscv64",
	"mips": "mips", "mipsle": "mipsel", "mips64": "mips64", "mips64le": "mipsel64",
}

// family is every architecture a kernel of arch also runs binaries of.
// Docker's `includes.arches` is matched against it (moby's arches()).
var family = map[Arch][]Arch{
	"amd64":    {"amd64", "x86", "x32"},
	"arm64":    {"arm64", "arm"},
	"mips64":   {"mips64", "mips64n32", "mips"},
	"mipsel64": {"mipsel64", "mipsel64n32", "mipsel"},
	"s390x":    {"s390x", "s390"},
}

func archFamily(a Arch) []Arch {
	if f, ok := family[a]; ok {
		return f
	}
	return []Arch{a}
}

// Equal reports whether two filters mean the same (Source and Origins
// aside).
func (f Filter) Equal(g Filter) bool {
	return f.Default == g.Default && slices.Equal(f.Arches, g.Arches) && slices.EqualFunc(f.Rules, g.Rules, sameRule)
}

func sameRule(a, b Rule) bool {
	return a.Action == b.Action && slices.Equal(a.Syscalls, b.Syscalls) && slices.Equal(a.Conds, b.Conds)
}

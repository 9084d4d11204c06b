package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// This file is the edge: Docker/OCI seccomp JSON in and OCI JSON out.
// runtime-spec's types stop here, converted through the tables below (the
// shape of runc's libcontainer/specconv).

var ociActions = map[specs.LinuxSeccompAction]Kind{
	specs.ActKill:        KillThread, // SCMP_ACT_KILL kills the thread (libseccomp)
	specs.ActKillThread:  KillThread,
	specs.ActKillProcess: KillProcess,
	specs.ActTrap:        Trap,
	specs.ActErrno:       Errno,
	specs.ActTrace:       Trace,
	specs.ActAllow:       Allow,
	specs.ActLog:         Log,
}

var kindToOCI = map[Kind]specs.LinuxSeccompAction{
	KillThread: specs.ActKillThread, KillProcess: specs.ActKillProcess, Trap: specs.ActTrap,
	Errno: specs.ActErrno, Trace: specs.ActTrace, Allow: specs.ActAllow, Log: specs.ActLog,
}

var ociOps = map[specs.LinuxSeccompOperator]Op{
	specs.OpNotEqual:     NotEqual,
	specs.OpLessThan:     Less,
	specs.OpLessEqual:    LessOrEqual,
	specs.OpEqualTo:      Equal,
	specs.OpGreaterEqual: GreaterOrEqual,
	specs.OpGreaterThan:  Greater,
	specs.OpMaskedEqual:  MaskedEqual,
}

var ociArches = map[specs.Arch]Arch{
	specs.ArchX86: "x86", specs.ArchX86_64: "amd64", specs.ArchX32: "x32",
	specs.ArchARM: "arm", specs.ArchAARCH64: "arm64",
	specs.ArchMIPS: "mips", specs.ArchMIPS64: "mips64", specs.ArchMIPS64N32: "mips64n32",
	specs.ArchMIPSEL: "mipsel", specs.ArchMIPSEL64: "mipsel64", specs.ArchMIPSEL64N32: "mipsel64n32",
	specs.ArchPPC: "ppc", specs.ArchPPC64: "ppc64", specs.ArchPPC64LE: "ppc64le",
	specs.ArchS390: "s390", specs.ArchS390X: "s390x",
	specs.ArchPARISC: "parisc", specs.ArchPARISC64: "parisc64", specs.ArchRISCV64: "riscv64",
	// Docker's current default profile maps loongarch64 in its archMap;
	// libseccomp 2.5.4 knows none of these four, so Compile refuses them
	// where a rule must cover them.
	specs.ArchLOONGARCH64: "loongarch64", specs.ArchM68K: "m68k", specs.ArchSH: "sh", specs.ArchSHEB: "sheb",
}

// maxErrno is the largest errno a filter may return (MAX_ERRNO).
const maxErrno = 4095

// Host is what Docker's `includes`/`excludes` and `archMap` are evaluated
// against. For the jail: the native architecture, no capabilities, the
// running kernel.
type Host struct {
	Arch   Arch
	Caps   []string
	Kernel [2]int // major, minor
}

// dockerProfile is Docker's profile format: OCI's LinuxSeccomp plus
// archMap and conditional syscall entries (moby/profiles/seccomp).
type dockerProfile struct {
	specs.LinuxSeccomp
	ArchMap  []dockerArch    `json:"archMap,omitempty"`
	Syscalls []dockerSyscall `json:"syscalls"`
	// DefaultErrno names defaultErrnoRet (containers/common's profiles,
	// Podman's default); used when defaultErrnoRet is absent.
	DefaultErrno string `json:"defaultErrno,omitempty"`
}

type dockerArch struct {
	Arch      specs.Arch   `json:"architecture"`
	SubArches []specs.Arch `json:"subArchitectures"`
}

type dockerSyscall struct {
	specs.LinuxSyscall
	Name     string        `json:"name,omitempty"` // Docker's older, singular form
	Comment  string        `json:"comment,omitempty"`
	Includes *dockerFilter `json:"includes,omitempty"`
	Excludes *dockerFilter `json:"excludes,omitempty"`
	Errno    string        `json:"errno,omitempty"` // names errnoRet (containers/common)
}

type dockerFilter struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// Import converts a Docker or OCI seccomp profile into a Filter. Decoding is
// strict (an unknown field is an error, so a misspelt key is not silently
// ignored); every unknown syscall name, action, operator or architecture is
// an error naming it and where it is (file:line:col and its JSON path).
// Syscall names are checked against libseccomp's table and ours where
// libseccomp is built in (checkName); Compile checks them again.
func Import(source string, data []byte, h Host) (Filter, error) {
	var p dockerProfile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Filter{}, jsonError(source, data, err)
	}
	if dec.More() {
		return Filter{}, fmt.Errorf("%s: %w: more than one JSON value; a profile is one object", source, ErrSyntax)
	}
	f := Filter{Source: source}
	var pos offsets // walked on the first error: a good profile never needs it
	var errs []error
	fail := func(field string, err error, format string, args ...any) {
		if pos == nil {
			pos = positions(data)
		}
		errs = append(errs, fmt.Errorf("%s: %s: %w %s", pos.at(source, data, field), field, err, fmt.Sprintf(format, args...)))
	}
	var ok bool
	var err error
	if p.DefaultErrnoRet, err = errnoNamed(p.DefaultErrnoRet, p.DefaultErrno); err != nil {
		fail("defaultErrno", ErrSyntax, "%v", err)
	}
	if p.DefaultAction == "" {
		fail("defaultAction", ErrSyntax, "is missing (e.g. SCMP_ACT_ERRNO or SCMP_ACT_ALLOW)")
	} else if f.Default, ok = action(p.DefaultAction, p.DefaultErrnoRet); !ok {
		fail("defaultAction", ErrUnknownAction, "%q (one of %s)", p.DefaultAction, actionNames())
	}
	if p.DefaultErrnoRet != nil && *p.DefaultErrnoRet > maxErrno {
		fail("defaultErrnoRet", ErrSyntax, "%d is larger than %d", *p.DefaultErrnoRet, maxErrno)
	}
	if p.DefaultAction == specs.ActNotify || p.ListenerPath != "" || p.ListenerMetadata != "" {
		fail("listenerPath", ErrUnsupported, "(SCMP_ACT_NOTIFY): bubblewrap loads the filter and keeps no listener; use another action")
	}
	if len(p.Flags) > 0 {
		fail("flags", ErrUnsupported, "%q: bubblewrap loads the filter without flags; remove them", p.Flags)
	}

	// Architectures: OCI lists them; Docker maps the native one to its
	// sub-architectures. Either way the native one is implicit here.
	arches := p.Architectures
	if len(p.ArchMap) > 0 {
		if len(arches) > 0 {
			fail("archMap", ErrSyntax, "and architectures are both set; use one")
		}
		for i, m := range p.ArchMap {
			if a, ok := ociArches[m.Arch]; !ok {
				fail(fmt.Sprintf("archMap[%d].architecture", i), ErrUnknownArch, "%q", m.Arch)
			} else if a == h.Arch {
				arches = append(append(arches, m.Arch), m.SubArches...)
			}
		}
	}
	for i, name := range arches {
		a, ok := ociArches[name]
		if !ok {
			fail(fmt.Sprintf("architectures[%d]", i), ErrUnknownArch, "%q (one of %s)", name, archNames())
			continue
		}
		if a != h.Arch && !slices.Contains(f.Arches, a) {
			f.Arches = append(f.Arches, a)
		}
	}

	for i, s := range p.Syscalls {
		field := fmt.Sprintf("syscalls[%d]", i)
		keep, err := h.applies(s)
		if err != nil {
			fail(field, ErrSyntax, "%v", err)
			continue
		}
		if !keep {
			continue
		}
		names := s.Names
		switch {
		case s.Name != "" && len(names) > 0:
			fail(field, ErrSyntax, "has both name and names; use names")
			continue
		case s.Name != "":
			names = []string{s.Name}
		case len(names) == 0:
			fail(field+".names", ErrSyntax, "is empty; list at least one syscall")
			continue
		}
		for j, n := range names {
			nf := fmt.Sprintf("%s.names[%d]", field, j)
			if s.Name != "" {
				nf = field + ".name"
			}
			if err := checkName(n); err != nil {
				fail(nf, ErrUnknownSyscall, "%q: %v; check the spelling", n, err)
			}
		}
		r := Rule{Syscalls: slices.Clone(names), Origin: field}
		if s.ErrnoRet, err = errnoNamed(s.ErrnoRet, s.Errno); err != nil {
			fail(field+".errno", ErrSyntax, "%v", err)
		}
		if r.Action, ok = action(s.Action, s.ErrnoRet); !ok {
			if s.Action == specs.ActNotify {
				fail(field+".action", ErrUnsupported, "%q: bubblewrap loads the filter and keeps no listener; use another action", s.Action)
			} else {
				fail(field+".action", ErrUnknownAction, "%q (one of %s)", s.Action, actionNames())
			}
			continue
		}
		if s.ErrnoRet != nil && *s.ErrnoRet > maxErrno {
			fail(field+".errnoRet", ErrSyntax, "%d is larger than %d", *s.ErrnoRet, maxErrno)
		}
		for j, a := range s.Args {
			af := fmt.Sprintf("%s.args[%d]", field, j)
			op, ok := ociOps[a.Op]
			switch {
			case !ok:
				fail(af+".op", ErrBadRule, "unknown operator %q (one of %s)", a.Op, opNames())
			case a.Index > 5:
				fail(af+".index", ErrBadRule, "%d: a system call has arguments 0 to 5", a.Index)
			case op != MaskedEqual && a.ValueTwo != 0:
				fail(af+".valueTwo", ErrBadRule, "is used only by SCMP_CMP_MASKED_EQ (value is the mask, valueTwo the datum)")
			}
			r.Conds = append(r.Conds, Cond{Arg: a.Index, Op: op, Value: a.Value, Datum: a.ValueTwo})
		}
		f.Rules = append(f.Rules, r)
	}
	return f, errors.Join(errs...)
}

// action converts an OCI action; ERRNO and TRACE without errnoRet return
// EPERM, as in runc.
func action(a specs.LinuxSeccompAction, errnoRet *uint) (Action, bool) {
	k, ok := ociActions[a]
	if !ok {
		return Action{}, false
	}
	out := Action{Kind: k}
	if k == Errno || k == Trace {
		out.Errno = uint16(eperm.Errno)
		if errnoRet != nil {
			out.Errno = uint16(min(*errnoRet, maxErrno))
		}
	}
	return out, true
}

// errnoNamed returns ret, or when it is unset the number of the errno
// name (containers/common writes both).
func errnoNamed(ret *uint, name string) (*uint, error) {
	if ret != nil || name == "" {
		return ret, nil
	}
	for n := range uint(maxErrno) {
		if unix.ErrnoName(syscall.Errno(n)) == name {
			return ptr(n), nil
		}
	}
	return nil, fmt.Errorf("%q is not an errno name (EPERM, ENOSYS, ...)", name)
}

// applies evaluates Docker's includes/excludes for the host: every
// capability and any architecture an include names must be there, with the
// kernel at least minKernel; an exclude drops the entry when any of its
// conditions holds.
func (h Host) applies(s dockerSyscall) (bool, error) {
	fam := archFamily(h.Arch)
	anyArch := func(list []string) bool {
		return slices.ContainsFunc(list, func(a string) bool { return slices.Contains(fam, Arch(a)) })
	}
	if in := s.Includes; in != nil {
		if len(in.Arches) > 0 && !anyArch(in.Arches) {
			return false, nil
		}
		for _, c := range in.Caps {
			if !slices.Contains(h.Caps, c) {
				return false, nil
			}
		}
		if in.MinKernel != "" {
			atLeast, err := h.kernelAtLeast(in.MinKernel)
			if err != nil || !atLeast {
				return false, err
			}
		}
	}
	if ex := s.Excludes; ex != nil {
		if anyArch(ex.Arches) || slices.ContainsFunc(ex.Caps, func(c string) bool { return slices.Contains(h.Caps, c) }) {
			return false, nil
		}
		if ex.MinKernel != "" {
			atLeast, err := h.kernelAtLeast(ex.MinKernel)
			if err != nil || atLeast {
				return false, err
			}
		}
	}
	return true, nil
}

func (h Host) kernelAtLeast(v string) (bool, error) {
	maj, minor, ok := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
		return false, fmt.Errorf("minKernel %q: write MAJOR.MINOR, e.g. 4.8", v)
	}
	return h.Kernel[0] > a || h.Kernel[0] == a && h.Kernel[1] >= b, nil
}

// ParseKernel reads MAJOR.MINOR from a kernel release ("6.18.44-fc").
func ParseKernel(release string) [2]int {
	var v [2]int
	parts := strings.SplitN(release, ".", 3)
	for i := range min(2, len(parts)) {
		digits := parts[i]
		if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
			digits = digits[:end]
		}
		v[i], _ = strconv.Atoi(digits)
	}
	return v
}

// jsonError turns a decoding error into file:line:col and a fix.
func jsonError(source string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset-1) // Offset counts the offending byte
		return fmt.Errorf("%s:%d:%d: %w: %v", source, line, col, ErrSyntax, se)
	case errors.As(err, &te):
		line, col := position(data, te.Offset-1)
		return fmt.Errorf("%s:%d:%d: %w: %s must be %s, not %s", source, line, col, ErrSyntax, te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		key, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return fmt.Errorf("%s: %w: %s (a Docker/OCI profile has defaultAction, defaultErrnoRet, architectures or archMap, syscalls)",
			positions(data).key(source, data, key), ErrSyntax, strings.TrimPrefix(err.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, int64(len(data)))
		return fmt.Errorf("%s:%d:%d: %w: the JSON ends early; close every [ and {", source, line, col, ErrSyntax)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s: %w: empty file; a profile is a JSON object with defaultAction", source, ErrSyntax)
	}
	return fmt.Errorf("%s: %w: %v", source, ErrSyntax, err)
}

// offsets maps the JSON path of every value in a document
// ("syscalls[1].names[0]", "defaultAction") to the offset where the value
// starts, so that errors found after decoding can say file:line:col.
type offsets map[string]int64

// positions walks data's tokens. It stops at the first syntax error, which
// the decoder reports on its own.
func positions(data []byte) offsets {
	type frame struct {
		path    string
		array   bool
		n       int  // the next element's index
		wantKey bool // an object awaits its next key
		key     string
	}
	out := offsets{}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	for {
		// InputOffset is just past the previous token; the next one starts
		// after blanks and a separator.
		start := dec.InputOffset()
		for start < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[start]) >= 0 {
			start++
		}
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.wantKey {
			top.key, top.wantKey = tok.(string), false
			continue
		}
		path := ""
		switch {
		case top == nil:
		case top.array:
			path = fmt.Sprintf("%s[%d]", top.path, top.n)
			top.n++
		case top.path == "":
			path, top.wantKey = top.key, true
		default:
			path, top.wantKey = top.path+"."+top.key, true
		}
		out[path] = start
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{path: path, array: d == '[', wantKey: d == '{'})
		}
	}
}

// at is "source:line:col" of field, or of the nearest enclosing value that
// is in the document (a missing field is located at its object); source
// alone when none is.
func (o offsets) at(source string, data []byte, field string) string {
	for p := field; p != ""; {
		if off, ok := o[p]; ok {
			line, col := position(data, off)
			return fmt.Sprintf("%s:%d:%d", source, line, col)
		}
		if i := strings.LastIndexAny(p, ".["); i >= 0 {
			p = p[:i]
		} else {
			p = ""
		}
	}
	return source
}

// key locates the first value stored under key anywhere in the document,
// for the decoder's "unknown field" error, which names only the key.
func (o offsets) key(source string, data []byte, key string) string {
	best := ""
	for p, off := range o {
		if (p == key || strings.HasSuffix(p, "."+key)) && (best == "" || off < o[best]) {
			best = p
		}
	}
	if best == "" {
		return source
	}
	return o.at(source, data, best)
}

func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	return bytes.Count(before, []byte("\n")) + 1, int(offset) - bytes.LastIndexByte(before, '\n')
}

// Export writes f as an OCI seccomp profile (linux.seccomp of a runtime
// config; Docker's --security-opt seccomp= and Kubernetes localhost/
// profiles read the same). Architectures are listed only when the filter
// has extra ones; otherwise the runtime's native one applies.
func Export(f Filter) ([]byte, error) {
	out := specs.LinuxSeccomp{DefaultAction: kindToOCI[f.Default.Kind]}
	if f.Default.Kind == Errno || f.Default.Kind == Trace {
		out.DefaultErrnoRet = ptr(uint(f.Default.Errno))
	}
	if len(f.Arches) > 0 {
		for _, a := range append([]Arch{Native()}, f.Arches...) {
			name, ok := archToOCI(a)
			if !ok {
				return nil, fmt.Errorf("%s: %w %q", f.Source, ErrUnknownArch, a)
			}
			out.Architectures = append(out.Architectures, name)
		}
	}
	for _, r := range f.Rules {
		s := specs.LinuxSyscall{Names: slices.Clone(r.Syscalls), Action: kindToOCI[r.Action.Kind]}
		if r.Action.Kind == Errno || r.Action.Kind == Trace {
			s.ErrnoRet = ptr(uint(r.Action.Errno))
		}
		for _, c := range r.Conds {
			op, _ := opToOCI(c.Op)
			s.Args = append(s.Args, specs.LinuxSeccompArg{Index: c.Arg, Value: c.Value, ValueTwo: c.Datum, Op: op})
		}
		out.Syscalls = append(out.Syscalls, s)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	return append(data, '\n'), err
}

func ptr[T any](v T) *T { return &v }

func archToOCI(a Arch) (specs.Arch, bool) {
	for k, v := range ociArches {
		if v == a {
			return k, true
		}
	}
	return "", false
}

func opToOCI(o Op) (specs.LinuxSeccompOperator, bool) {
	for k, v := range ociOps {
		if v == o {
			return k, true
		}
	}
	return "", false
}

func actionNames() string { return sortedNames(ociActions) }
func opNames() string     { return sortedNames(ociOps) }
func archNames() string   { return sortedNames(ociArches) }

func sortedNames[K ~string, V any](m map[K]V) string {
	var out []string
	for k := range m {
		out = append(out, string(k))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

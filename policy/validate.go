package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// MaxProtectDepth bounds protect_depth: deeper searches cost a launch more
// than they protect.
const MaxProtectDepth = 16

// DefaultProtectDepth is used when no profile sets protect_depth.
const DefaultProtectDepth = 3

// RlimitNames are the resources limits.rlimits may set.
var RlimitNames = []string{"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// MinPids and MinMemory are the smallest caps a jail starts under:
// bubblewrap's two processes and agentjail's exec stage (a Go program, with
// its threads) count too.
const (
	MinPids   = 32
	MinMemory = 32 << 20
)

// maxPids is the kernel's PID_MAX_LIMIT on 64-bit (include/linux/threads.h).
const maxPids = 4 << 20

// envName reports whether s is a variable name: [A-Za-z_][A-Za-z0-9_]*.
func envName(s string) bool {
	for i, c := range s {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// Validate reports every problem of a merged policy at once (errors.Join of
// *FieldError), each with its field path and origin.
func Validate(p Policy) error {
	v := validator{p: p}
	v.oneOf("inner_sandbox", p.InnerSandbox, InnerFree, InnerSealed)
	if p.InnerSandbox != InnerSealed && isRootUser(p.User) {
		v.add("user", "uid 0 is allowed only with inner_sandbox: sealed: a jailed root could write host sysctls under /proc/sys and cannot build its own sandbox (use an unprivileged user)")
	}
	fs := p.Filesystem
	v.oneOf("filesystem.base", fs.Base, BaseHost, BaseMinimal)
	v.oneOf("filesystem.proc", fs.Proc, ProcFresh, ProcFreshOrBind)
	v.paths("filesystem.read", fs.Read, false)
	v.paths("filesystem.write", fs.Write, false)
	v.paths("filesystem.protect", fs.Protect, true)
	v.paths("filesystem.deny", fs.Deny, false)
	if d := fs.ProtectDepth; d != nil && (*d < 0 || *d > MaxProtectDepth) {
		v.add("filesystem.protect_depth", fmt.Sprintf("must be between 0 and %d", MaxProtectDepth))
	}
	for _, mp := range slices.Sorted(maps.Keys(fs.Tmpfs)) {
		field := "filesystem.tmpfs[" + mp + "]"
		if !path.IsAbs(mp) || path.Clean(mp) != mp {
			v.add(field, "mount point must be a clean absolute path such as /tmp")
		}
		if fs.Tmpfs[mp].Size <= 0 {
			v.add(field+".size", "every tmpfs needs a size cap (e.g. size: 256MiB)")
		}
	}
	if fs.Home.Size != nil && *fs.Home.Size <= 0 {
		v.add("filesystem.home.size", "must be positive (e.g. 256MiB)")
	}
	for i, c := range fs.Credentials {
		if rest, ok := cutHome(c); !ok || rest == "" || hasDotDot(rest) {
			v.add(fmt.Sprintf("filesystem.credentials[%d]", i), fmt.Sprintf("%q must be a path under ~ such as ~/.ssh", c))
		}
	}
	// A variable agentjail always removes would be dropped without a word.
	removed := func(k string) string {
		return fmt.Sprintf("agentjail always removes %s from the jail's environment (it describes the Claude Code session agentjail was started from, not the jail's); drop it here", k)
	}
	for i, a := range p.Environment.Allow {
		if !envName(strings.TrimSuffix(a, "*")) {
			v.add(fmt.Sprintf("environment.allow[%d]", i), fmt.Sprintf("%q is not a variable name or a prefix ending in * (e.g. LC_*)", a))
		}
		if slices.Contains(AlwaysUnset, a) {
			v.add(fmt.Sprintf("environment.allow[%d]", i), removed(a))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Environment.Set)) {
		if !envName(k) {
			v.add("environment.set["+k+"]", fmt.Sprintf("%q is not a variable name", k))
		}
		if strings.ContainsRune(p.Environment.Set[k], 0) {
			v.add("environment.set["+k+"]", "value contains a NUL byte")
		}
		if slices.Contains(AlwaysUnset, k) {
			v.add("environment.set["+k+"]", removed(k))
		}
	}
	for i, u := range p.Environment.Unset {
		if !envName(u) {
			v.add(fmt.Sprintf("environment.unset[%d]", i), fmt.Sprintf("%q is not a variable name", u))
		}
	}
	v.network(p.Network)
	v.paths("seccomp.files", p.Seccomp.Files, false)
	for _, k := range slices.Sorted(maps.Keys(p.Limits.Rlimits)) {
		if !slices.Contains(RlimitNames, k) {
			v.add("limits.rlimits["+k+"]", fmt.Sprintf("unknown resource %q (one of %s)", k, strings.Join(RlimitNames, ", ")))
		}
	}
	if n := p.Limits.Pids; n != nil && (*n < MinPids || *n > maxPids) {
		v.add("limits.pids", fmt.Sprintf("%d is out of range: between %d (bubblewrap and agentjail's exec stage need some tasks themselves) and %d (the kernel's pid limit); e.g. pids: 4096", *n, MinPids, maxPids))
	}
	if m := p.Limits.Memory; m != nil && m.Percent == 0 && m.Bytes < MinMemory {
		v.add("limits.memory", fmt.Sprintf("%s is too little to start a jail (at least %s); e.g. memory: 8GiB or memory: 50%%", FormatSize(m.Bytes), FormatSize(MinMemory)))
	}
	if p.Limits.Swap != nil && p.Limits.Memory == nil {
		v.add("limits.swap", "needs limits.memory (swap is allowed on top of the memory cap)")
	}
	if c := p.Claude; On(c.Home) && !On(fs.Home.Private) {
		v.add("claude.home", "needs filesystem.home.private: true (the private Claude Code directory is mounted at ~/.claude in the private home)")
	}
	if c := p.Claude; On(c.Credentials) && !On(c.Home) {
		v.add("claude.credentials", "needs claude.home: true (the credentials are copied into the private Claude Code directory)")
	}
	if c := p.Claude; On(c.Settings) && !On(c.Home) {
		v.add("claude.settings", "needs claude.home: true (the settings are copied into the private Claude Code directory)")
	}
	if d := p.Claude.Dir; d != "" {
		switch {
		case !On(p.Claude.Home):
			v.add("claude.dir", "needs claude.home: true (its sessions are the private Claude Code directory's)")
		case !path.IsAbs(d) || path.Clean(d) != d || d == "/":
			v.add("claude.dir", fmt.Sprintf("%q must be a clean absolute directory such as /var/lib/agentjail/claude-tier1", d))
		}
	}
	if c := p.Codex; On(c.Home) && !On(fs.Home.Private) {
		v.add("codex.home", "needs filesystem.home.private: true (the private Codex directory is mounted at ~/.codex in the private home)")
	}
	if c := p.Codex; On(c.Credentials) && !On(c.Home) {
		v.add("codex.credentials", "needs codex.home: true (the credentials are copied into the private Codex directory)")
	}
	return InFileOrder(v.errs)
}

type validator struct {
	p    Policy
	errs []error
}

func (v *validator) add(field, msg string) {
	v.errs = append(v.errs, ErrorAt(v.p, field, msg))
}

func (v *validator) oneOf(field, got string, allowed ...string) {
	if got != "" && !slices.Contains(allowed, got) {
		v.add(field, fmt.Sprintf("%q is not one of %s", got, strings.Join(allowed, ", ")))
	}
}

// paths checks that every entry is absolute once expanded: it starts with /,
// ~, ${HOME} or ${PWD}. Relative entries are allowed where relative says so
// (protect patterns, matched under each writable root).
func (v *validator) paths(field string, list []string, relative bool) {
	for i, s := range list {
		f := field + "[" + strconv.Itoa(i) + "]"
		switch {
		case s == "":
			v.add(f, "empty path")
		case strings.ContainsRune(s, 0):
			v.add(f, "path contains a NUL byte")
		case strings.Contains(s, "${") && !hasKnownVar(s):
			v.add(f, fmt.Sprintf("%q uses an unknown variable; only ~, ${HOME} and ${PWD} are expanded, at the start of a path", s))
		case hasDotDot(s):
			v.add(f, fmt.Sprintf("%q contains a .. component; write the path it means", s))
		case relative && !isAbsForm(s):
			if _, err := path.Match(s, ""); err != nil {
				v.add(f, fmt.Sprintf("%q is not a valid pattern: %v", s, err))
			}
		case !isAbsForm(s):
			v.add(f, fmt.Sprintf("%q must be absolute (start with /, ~/ or ${PWD}/)", s))
		}
	}
}

func isAbsForm(s string) bool {
	if _, ok := cutHome(s); ok {
		return true
	}
	if r, ok := strings.CutPrefix(s, "${PWD}"); ok {
		return r == "" || r[0] == '/'
	}
	return path.IsAbs(s)
}

func hasKnownVar(s string) bool {
	_, home := cutHome(s)
	return (home || strings.HasPrefix(s, "${PWD}")) && !strings.Contains(s[1:], "${")
}

func hasDotDot(s string) bool {
	return slices.Contains(strings.Split(s, "/"), "..")
}

func isRootUser(u string) bool { return u == "root" || u == "0" }

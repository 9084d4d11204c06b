//go:build linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

var kindToLib = map[Kind]libseccomp.ScmpAction{
	Allow: libseccomp.ActAllow, Log: libseccomp.ActLog, Trace: libseccomp.ActTrace,
	Errno: libseccomp.ActErrno, Trap: libseccomp.ActTrap,
	KillThread: libseccomp.ActKillThread, KillProcess: libseccomp.ActKillProcess,
}

var opToLib = map[Op]libseccomp.ScmpCompareOp{
	NotEqual: libseccomp.CompareNotEqual, Less: libseccomp.CompareLess,
	LessOrEqual: libseccomp.CompareLessOrEqual, Equal: libseccomp.CompareEqual,
	GreaterOrEqual: libseccomp.CompareGreaterEqual, Greater: libseccomp.CompareGreater,
	MaskedEqual: libseccomp.CompareMaskedEqual,
}

func (a Action) lib() libseccomp.ScmpAction {
	act := kindToLib[a.Kind]
	if a.Kind == Errno || a.Kind == Trace {
		act = act.SetReturnCode(int16(a.Errno))
	}
	return act
}

// Compile returns f's BPF program for the native architecture and
// f.Arches. System calls of any other architecture kill the process:
// killing only the thread (libseccomp's default) would leave a
// multi-threaded program such as a Go binary hung.
//
// One libseccomp filter is built per architecture and merged: a rule by
// number (a syscall from newSyscalls) can be placed only on the native
// architecture, because libseccomp translates numbers between
// architectures through its own name table.
func Compile(f Filter) ([]byte, error) {
	native := Native()
	var merged *libseccomp.ScmpFilter
	defer func() {
		if merged != nil {
			merged.Release()
		}
	}()
	for _, arch := range append([]Arch{native}, f.Arches...) {
		one, err := compileArch(f, arch, arch == native)
		if err != nil {
			return nil, err
		}
		if merged == nil {
			merged = one
			continue
		}
		if err := merged.Merge(one); err != nil {
			one.Release()
			return nil, fmt.Errorf("%s: architecture %s: %w", f.Source, arch, err)
		}
	}
	return exportBPF(merged)
}

func compileArch(f Filter, arch Arch, native bool) (*libseccomp.ScmpFilter, error) {
	if arch == "" {
		return nil, fmt.Errorf("%w: seccomp on this architecture", ErrUnsupported)
	}
	sf, err := libseccomp.NewFilter(f.Default.lib())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Source, err)
	}
	ok := false
	defer func() {
		if !ok {
			sf.Release()
		}
	}()
	if err := sf.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Source, err)
	}
	// A binary tree over syscall numbers keeps the per-call cost
	// logarithmic in the number of rules.
	_ = sf.SetOptimize(2)
	if !native {
		la, err := libseccomp.GetArchFromString(string(arch))
		if err != nil {
			return nil, fmt.Errorf("%s: %w %q", f.Source, ErrUnknownArch, arch)
		}
		nat, _ := libseccomp.GetNativeArch()
		if err := sf.AddArch(la); err != nil {
			return nil, fmt.Errorf("%s: architecture %s: %w", f.Source, arch, err)
		}
		if err := sf.RemoveArch(nat); err != nil {
			return nil, fmt.Errorf("%s: architecture %s: %w", f.Source, arch, err)
		}
	}
	var errs []error
	for _, r := range f.Rules {
		// libseccomp refuses a rule whose action is the default one; such
		// a rule changes nothing (runc skips it too).
		if r.Action == f.Default {
			continue
		}
		conds := make([]libseccomp.ScmpCondition, 0, len(r.Conds))
		for _, c := range r.Conds {
			vals := []uint64{c.Value}
			if c.Op == MaskedEqual {
				vals = append(vals, c.Datum)
			}
			cond, err := libseccomp.MakeCondition(c.Arg, opToLib[c.Op], vals...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w: %v", f.Source, r.Origin, ErrBadRule, err))
				continue
			}
			conds = append(conds, cond)
		}
		for _, name := range r.Syscalls {
			nr, byNumber, err := resolve(name)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w %q: neither libseccomp %s nor agentjail's table of newer calls knows it; check the spelling",
					f.Source, r.Origin, ErrUnknownSyscall, name, libVersion()))
				continue
			}
			if byNumber && nr < 0 {
				continue // not a call of this architecture
			}
			if byNumber && !native {
				if f.Default.stricter(r.Action) {
					continue // the default already refuses it on this architecture
				}
				errs = append(errs, fmt.Errorf("%s: %s: %w: %q cannot be ruled on for architecture %s with libseccomp %s (it is known here only by its number); remove that architecture or the rule",
					f.Source, r.Origin, ErrUnsupported, name, arch, libVersion()))
				continue
			}
			if len(conds) == 0 {
				err = sf.AddRule(nr, r.Action.lib())
			} else {
				err = sf.AddRuleConditional(nr, r.Action.lib(), conds)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w: %s: %v", f.Source, r.Origin, ErrBadRule, name, err))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	ok = true
	return sf, nil
}

// resolve finds a syscall's native number: libseccomp's table first, then
// ours. byNumber says only our table knew it; a negative number, that the
// call exists only on other architectures (libseccomp's own such names
// resolve to negative pseudo-numbers too, which it skips).
func resolve(name string) (nr libseccomp.ScmpSyscall, byNumber bool, err error) {
	nr, err = libseccomp.GetSyscallFromName(name)
	if err == nil {
		return nr, false, nil
	}
	if n, ok := newSyscalls[name]; ok {
		return libseccomp.ScmpSyscall(n), true, nil
	}
	if nums, ok := archSyscalls[name]; ok {
		if n, ok := nums[Native()]; ok {
			return libseccomp.ScmpSyscall(n), true, nil
		}
		return -1, true, nil
	}
	return 0, false, err
}

// checkName reports a syscall name that neither libseccomp nor our tables
// know, for Import.
func checkName(name string) error {
	if _, _, err := resolve(name); err != nil || name == "" {
		return fmt.Errorf("neither libseccomp %s nor agentjail's table of newer calls knows it", libVersion())
	}
	return nil
}

// exportBPF reads the program back through a memfd: libseccomp 2.5.4 has
// no seccomp_export_bpf_mem (2.6 does), only export to a file descriptor.
func exportBPF(sf *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("agentjail-seccomp-export", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("export seccomp filter: memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "agentjail-seccomp-export")
	defer mem.Close()
	if err := sf.ExportBPF(mem); err != nil {
		return nil, fmt.Errorf("export seccomp filter: %w", err)
	}
	if _, err := mem.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(mem)
}

// KnownSyscalls lists every system call name libseccomp or agentjail's
// table knows on any of arches, sorted.
func KnownSyscalls(arches ...Arch) ([]string, error) {
	var names []string
	for _, a := range arches {
		la, err := libseccomp.GetArchFromString(string(a))
		if err != nil {
			return nil, fmt.Errorf("%w %q", ErrUnknownArch, a)
		}
		// Numbers are below 1024 everywhere but on MIPS (4000+) and x32.
		for nr := range 1024 {
			if name, err := libseccomp.ScmpSyscall(nr).GetNameByArch(la); err == nil && name != "" {
				names = append(names, name)
			}
		}
	}
	for name := range newSyscalls {
		names = append(names, name)
	}
	for name, nums := range archSyscalls {
		if slices.ContainsFunc(arches, func(a Arch) bool { _, ok := nums[a]; return ok }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func libVersion() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

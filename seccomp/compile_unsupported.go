//go:build !linux || !cgo

package seccomp

import "fmt"

// Compile needs libseccomp (cgo). A build without it runs jails without a
// filter only when none is asked for (seccomp.default: false and no files).
func Compile(f Filter) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w: this agentjail was built without cgo and libseccomp; rebuild with CGO_ENABLED=1 and libseccomp-dev, or set seccomp.default: false", f.Source, ErrUnsupported)
}

// KnownSyscalls needs libseccomp's tables.
func KnownSyscalls(arches ...Arch) ([]string, error) {
	return nil, fmt.Errorf("%w: listing syscalls needs libseccomp; rebuild with CGO_ENABLED=1", ErrUnsupported)
}

// checkName can check only that a name is there: the syscall tables are
// libseccomp's. Compile refuses every filter in this build anyway.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("an empty name is no system call")
	}
	return nil
}

// libVersion names no libseccomp: there is none in this build.
func libVersion() string { return "none" }

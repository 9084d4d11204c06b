package seccomp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// File returns a sealed memfd holding a BPF program, at offset 0, for
// bwrap's --add-seccomp-fd (bwrap reads it to the end and closes it). The
// seals keep anyone holding the fd from changing the program after it was
// checked.
func File(name string, bpf []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("agentjail-seccomp-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter %s: memfd_create: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "seccomp-"+name)
	_, err = f.Write(bpf)
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	}
	if err == nil {
		_, err = f.Seek(0, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seccomp filter %s: %w", name, err)
	}
	return f, nil
}

// CurrentHost is the host a jail's filters are evaluated for: the native
// architecture, the running kernel, and no capabilities (the agent holds
// none).
func CurrentHost() Host {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return Host{Arch: Native(), Kernel: ParseKernel(unix.ByteSliceToString(u.Release[:]))}
}

package supervise

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// StageExecutable returns a path to the agentjail binary exe that any run
// user can open, for bwrap to bind as the exec stage. bwrap runs as the run
// user and opens bind sources with that user's permissions, so a binary
// under a private directory (/root/go/bin) is first linked or copied into
// dir (root-owned, 0755), once per binary: the name carries its inode, size
// and mtime.
func StageExecutable(exe, dir string) (string, error) {
	st, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	if readableByAll(exe) {
		return exe, nil
	}
	sys := st.Sys().(*syscall.Stat_t)
	staged := filepath.Join(dir, fmt.Sprintf("agentjail-%d-%d-%d", sys.Ino, st.Size(), st.ModTime().UnixNano()))
	if _, err := os.Stat(staged); err == nil {
		return staged, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("stage the exec stage binary: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".agentjail-*")
	if err != nil {
		return "", fmt.Errorf("stage the exec stage binary: %w", err)
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(exe)
	if err != nil {
		tmp.Close()
		return "", err
	}
	_, err = io.Copy(tmp, src)
	src.Close()
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), staged)
	}
	if err != nil {
		return "", fmt.Errorf("stage the exec stage binary in %s: %w", dir, err)
	}
	return staged, nil
}

// readableByAll reports whether every directory above p is searchable and p
// readable and executable by others, judged from mode bits.
func readableByAll(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm()&0o005 != 0o005 {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CommonDir is what the masks over a missing commondir hold: the git
// directory itself, which is where git looks when there is no commondir
// (setup.c, get_common_dir_noenv). git dies on an empty commondir.
const CommonDir = ".\n"

// CommonDirFile makes sure path, next to the masks' empty file (call
// EmptyFile first), is a regular file holding CommonDir that every user
// can read (0444): the source the jail's masks over a missing commondir are
// bound from (mounts.Input.CommonDirFile). Like the empty file it is made
// once and shared by every run; a file holding anything else is an error,
// never used.
func CommonDirFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createCommonDir(path); err != nil {
			return fmt.Errorf("create the commondir masks' file %s: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	data, _ := io.ReadAll(io.LimitReader(f, int64(len(CommonDir))+1))
	if !fi.Mode().IsRegular() || !bytes.Equal(data, []byte(CommonDir)) || fi.Mode().Perm()&0o444 != 0o444 {
		return fmt.Errorf("%s should be a file every user can read holding %q, and is not (%v, %q); remove it", path, CommonDir, fi.Mode(), data)
	}
	return nil
}

// createCommonDir creates path with CommonDir in it, 0444, atomically:
// concurrent runs may race to create it, and each makes the same.
func createCommonDir(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".commondir-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(CommonDir)
	if err == nil {
		err = tmp.Chmod(0o444)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}

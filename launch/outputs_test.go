package launch

import (
	"io/fs"
	"syscall"
	"testing"
)

// TestOutputErrorNamesTheDirectory: a record that cannot be created is
// said as its directory's refusal, whether the error names the directory
// or the file itself (an open in a directory the operator may not write).
func TestOutputErrorNamesTheDirectory(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"/root", "/root/r.json"} {
		err := outputError("--record", "/root/r.json", &fs.PathError{Op: "open", Path: at, Err: syscall.EACCES}, "choose a writable directory")
		if want := "--record /root/r.json: cannot create a file in /root: permission denied; choose a writable directory"; err.Error() != want {
			t.Errorf("error at %s: %q, want %q", at, err, want)
		}
	}
}

package seccomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/hostfs"
)

// Cache keeps compiled filters between runs: compiling one with libseccomp
// is work every launch would repeat for the same profile. A cache is a
// trust store (a filter read from it is what the jail gets), so it is a
// directory that only agentjail's user can write, reached without
// following a link, never under a writable root of the run (whose agent
// could plant an entry for a later run), and an entry is read only when it
// is a plain file of that user's whose first line names the exact filter,
// libseccomp, architecture and kernel it was compiled for. Anything else
// is compiled afresh.
type Cache struct {
	dir *hostfs.Dir
}

// cacheFormat begins every entry; a change of the format changes it.
const cacheFormat = "agentjail-seccomp-bpf-v1"

// maxEntry bounds an entry read back (a compiled filter is a few KiB).
const maxEntry = 1 << 20

// OpenCache opens (making it when missing, 0700) the cache directory path,
// or returns nil and why it is not used: it lies under one of roots (the
// run's writable roots), it or its parent is writable by another user, or
// it is not agentjail's user's own.
func OpenCache(path string, roots []string) (*Cache, string) {
	d, err := hostfs.Strict.MkdirAll(path, 0o700)
	if err != nil {
		return nil, fmt.Sprintf("cannot open %s: %v", path, err)
	}
	why := ""
	real := d.Where()
	st, err := d.Stat()
	parent, perr := d.Lstat("..")
	switch {
	case under(real, roots):
		why = fmt.Sprintf("%s lies under a writable root", real)
	case err != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0:
		why = fmt.Sprintf("%s is not agentjail's user's alone (owner %d, mode %04o)", real, st.Uid, st.Mode&0o7777)
	case perr != nil || parent.Mode&0o022 != 0 && parent.Mode&unix.S_ISVTX == 0:
		why = fmt.Sprintf("the directory that holds %s is writable by others", real)
	}
	if why != "" {
		d.Close()
		return nil, why
	}
	return &Cache{dir: d}, ""
}

func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// Close lets the directory go.
func (c *Cache) Close() {
	if c != nil {
		c.dir.Close()
	}
}

// Compile is the package's Compile, through the cache: an entry made for
// exactly f here is read back; otherwise f is compiled and stored. A nil
// Cache only compiles. A cache that cannot be read or written is no error:
// the filter is then compiled.
func (c *Cache) Compile(f Filter) ([]byte, error) {
	if c == nil {
		return Compile(f)
	}
	key, err := cacheKey(f)
	if err != nil {
		return Compile(f)
	}
	header := cacheFormat + " " + key + "\n"
	name := key[:32]
	if data, err := c.dir.ReadOwn(name, maxEntry); err == nil {
		if bpf, ok := bytes.CutPrefix(data, []byte(header)); ok && len(bpf) > 0 && len(bpf)%8 == 0 {
			return bpf, nil
		}
	}
	bpf, err := Compile(f)
	if err != nil {
		return nil, err
	}
	c.dir.Replace(name, append([]byte(header), bpf...))
	return bpf, nil
}

// cacheKey names what a compiled filter depends on: the filter's meaning
// (its source names only its origin), libseccomp's version (its syscall
// tables), the architecture and the kernel.
func cacheKey(f Filter) (string, error) {
	f.Source = ""
	rules := make([]Rule, len(f.Rules))
	for i, r := range f.Rules {
		r.Origin = ""
		rules[i] = r
	}
	f.Rules = rules
	spec, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{spec, []byte(libVersion()), []byte(Native()), u.Release[:], []byte(strconv.Itoa(len(spec)))} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

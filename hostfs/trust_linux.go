package hostfs

import (
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// trusted reports whether a symbolic link (its status link), in a
// directory (dir), is the operator's, so that agentjail follows it outside
// the writable roots: it is owned by root or by agentjail's effective
// user, and no one else can replace it, as its directory is theirs too
// and writable by no one else, or sticky (where only a link's owner may
// remove or rename it: /tmp). A link outside this run's writable roots may
// lie in an earlier run's, planted by its agent (owned by the run user) to
// lead agentjail's next write to a file of its choosing.
func trusted(link, dir *unix.Stat_t) bool {
	return ours(link) && (dir.Mode&unix.S_ISVTX != 0 || ours(dir) && dir.Mode&0o022 == 0)
}

func ours(st *unix.Stat_t) bool { return st.Uid == 0 || int(st.Uid) == os.Geteuid() }

// trustedLink is trusted for the link at the path link in the directory
// dir.
func trustedLink(dir, link string) bool {
	var d, l unix.Stat_t
	return unix.Lstat(link, &l) == nil && unix.Lstat(dir, &d) == nil && trusted(&l, &d)
}

// trustedName fails when name in d, outside the writable roots, is a
// symbolic link that is not the operator's (trusted).
func (d *Dir) trustedName(name string) error {
	var l, dir unix.Stat_t
	if err := unix.Fstatat(d.fd(), name, &l, unix.AT_SYMLINK_NOFOLLOW); err != nil || l.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil
	}
	if err := unix.Fstat(d.fd(), &dir); err != nil || !trusted(&l, &dir) {
		return fmt.Errorf("%s: %w", path.Join(d.Path, name), ErrForeignLink)
	}
	return nil
}

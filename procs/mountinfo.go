package procs

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/PID/mountinfo (proc(5)).
type Mount struct {
	ID, Parent int
	Root       string   // the path within its filesystem that is mounted
	Point      string   // where, relative to the reader's root
	Options    []string // per-mount options (ro, nosuid, relatime, ...)
	FSType     string
	// Super are the filesystem's own options (a cgroup v1 mount's names
	// its controllers: rw,pids); nil when the line has none.
	Super []string
}

// ParseMountinfo reads a mountinfo table.
func ParseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		// id parent major:minor root point options [optional...] - fstype source superopts
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 || sep+1 >= len(f) {
			return nil, fmt.Errorf("mountinfo line %d: %w: %q", n, ErrMountinfo, sc.Text())
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %q", n, ErrMountinfo, sc.Text())
		}
		out = append(out, Mount{
			ID: id, Parent: parent,
			Root: unescape(f[3]), Point: unescape(f[4]),
			Options: strings.Split(f[5], ","),
			FSType:  f[sep+1],
		})
		if sep+3 < len(f) {
			out[len(out)-1].Super = strings.Split(f[sep+3], ",")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash (fs/proc_namespace.c, mangle()).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// procEmptyDirs are the permanently empty directories of procfs, which a
// locked mount may cover without hiding anything: only fs/binfmt_misc under
// /proc/sys (fs/binfmt_misc.c, register_sysctl_mount_point).
var procEmptyDirs = []string{"sys/fs/binfmt_misc"}

// ProcCovers tells whether the jail can mount a fresh /proc, and if not,
// why: the mounts that stand in the way.
//
// bubblewrap started by an unprivileged user makes a user namespace, and
// there the kernel lets a new procfs be mounted only when some procfs
// already mounted in the mount namespace is "fully visible"
// (fs/namespace.c: mount_too_revealing, mnt_already_visible): mounted
// from its root, not locked read-only (the new mount is read-write), with
// relatime access times (the new mount's default; locked atime flags must
// match), and with no child mount over anything but a permanently empty
// directory. Every mount copied into the new user namespace is locked, so
// a container runtime's masked paths (/proc/kcore under /dev/null, ...) and
// read-only paths (/proc/sys, ...) make every fresh /proc fail
// ("Can't mount proc on /newroot/proc: Operation not permitted").
//
// It returns nil when a fully visible procfs exists. Otherwise it lists
// what keeps the procfs at /proc (the last one mounted there, which is the
// one on top; else the last procfs) from being fully visible, each as a
// path with the reason in parentheses when the path itself is not the
// cover; "/proc (no procfs mounted)" when there is none.
func ProcCovers(table []Mount) []string {
	var last []string
	lastAtProc := false
	for _, m := range table {
		if m.FSType != "proc" || m.Root != "/" {
			continue
		}
		var bad []string
		if slices.Contains(m.Options, "ro") {
			bad = append(bad, m.Point+" (read-only)")
		}
		if !slices.Contains(m.Options, "relatime") || slices.Contains(m.Options, "noatime") || slices.Contains(m.Options, "nodiratime") {
			bad = append(bad, m.Point+" (access-time flags other than relatime)")
		}
		for _, c := range table {
			if c.Parent != m.ID || c.ID == m.ID {
				continue
			}
			if rel, ok := strings.CutPrefix(c.Point, m.Point+"/"); ok && slices.Contains(procEmptyDirs, rel) {
				continue
			}
			if c.Point == m.Point {
				bad = append(bad, c.Point+" (another mount on top)")
			} else {
				bad = append(bad, c.Point)
			}
		}
		if len(bad) == 0 {
			return nil
		}
		if atProc := path.Clean(m.Point) == "/proc"; atProc || !lastAtProc {
			last, lastAtProc = bad, atProc
		}
	}
	if last == nil {
		return []string{"/proc (no procfs mounted)"}
	}
	return last
}

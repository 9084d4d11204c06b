package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentjail/agentjail/procs"
	"github.com/agentjail/agentjail/record"
	"golang.org/x/sys/unix"
)

// FileCopy is one file or tree copied into a run's agent-homes directory; with
// Data, one file made with that content instead, Src only naming where it
// comes from (the part of the operator's Claude Code login a run gets).
// From reaches Src: with the run's writable roots, so that no link an
// agent could have planted there is followed.
type FileCopy struct {
	Src, Dst string
	Data     []byte
	From     Walker
}

// MaxCopy bounds what one run's copies take together: an agent that may
// write where a copied tree lies (a home given as a writable root) must
// not fill agentjail's run directory, often a small tmpfs, with it.
var MaxCopy = Budget{Entries: 20000, Bytes: 64 << 20}

// AgentHomeDir is a directory made in a run's agent-homes directory; Size, when
// not 0, caps it with a tmpfs of that size.
type AgentHomeDir struct {
	Path string
	Size int64
}

// AgentHomes is what MakeAgentHomes made: its root, the tmpfs mounts in it, and what it
// could not do as asked.
type AgentHomes struct {
	Root   string
	Mounts []string
	// Degradations are the caps that could not be applied.
	Degradations []record.Note
}

// MakeAgentHomes makes a run's agent-homes directory root (fresh, root-owned 0711: the
// run user, as whom bubblewrap opens bind sources, may traverse it but not
// list it), the directories dirs in it, and the copies, all owned by
// uid:gid. Everything is created and filled while owned by agentjail's user
// and 0700, and handed over last (lchown, never following a link): no
// process of the run user can slip a symlink into a path agentjail writes
// through. The parent of root is made traversable too.
//
// A directory with a Size is a tmpfs of that size, so that what the agent
// writes there is capped as its private home is. It is mounted in a
// private copy of the mount namespace that only the calling OS thread
// holds (PrivateMounts): the host never sees it, so it cannot disturb other
// runs (bubblewrap's --ro-bind / / fails when a submount vanishes while it
// remounts them read-only), and it goes when the thread or the process
// does, even when agentjail is SIGKILLed. MakeAgentHomes then locks the calling
// goroutine to its thread for good: bwrap must be started, and the
// directory read back and removed, from that goroutine. Where no tmpfs can
// be mounted (no CAP_SYS_ADMIN), the directory is a plain one and the
// degradation is reported.
//
// A source is read from descriptors through its walker (Walker.Copy):
// below a writable root no link is followed, the source's own name
// included; links inside a copied tree are copied as links; sockets, fifos
// and devices are skipped; all copies together take at most MaxCopy.
func MakeAgentHomes(root string, dirs []AgentHomeDir, copies []FileCopy, uid, gid int) (*AgentHomes, error) {
	st := &AgentHomes{Root: root}
	if err := traversable(filepath.Dir(root)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(root, 0o711); err != nil {
		return nil, fmt.Errorf("create the run's agent-homes directory: %w", err)
	}
	if err := os.Chmod(root, 0o711); err != nil { // the umask may have narrowed it
		return st, err
	}
	var made []string // created under root, handed over at the end
	mkdirs := func(dir string) error {
		rel, err := filepath.Rel(root, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("make the run's agent homes: %s is not inside %s", dir, root)
		}
		if rel == "." {
			return nil
		}
		p := root
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			p = filepath.Join(p, part)
			if err := os.Mkdir(p, 0o700); err == nil {
				made = append(made, p)
			} else if !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("make the run's agent homes: %w", err)
			}
		}
		return nil
	}
	for _, d := range dirs {
		if err := mkdirs(d.Path); err != nil {
			return st, err
		}
		if d.Size <= 0 {
			continue
		}
		err := errors.New("only root can mount one")
		if os.Getuid() == 0 {
			err = PrivateMounts()
		}
		if err == nil {
			// Root's 0700 until handed over with the rest.
			err = unix.Mount("tmpfs", d.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", d.Size))
		}
		if err != nil {
			// "staging.size" is the record's name from before the homes
			// were called so: the record is a stable contract.
			st.Degradations = append(st.Degradations, record.Note{What: "staging.size", Detail: fmt.Sprintf("%s is not capped at %d bytes (a tmpfs: %v); what the agent writes there is limited by that filesystem alone", d.Path, d.Size, err)})
			continue
		}
		st.Mounts = append(st.Mounts, d.Path)
	}
	budget := MaxCopy
	for _, c := range copies {
		if err := mkdirs(filepath.Dir(c.Dst)); err != nil {
			return st, err
		}
		if c.Data != nil {
			if err := writeNew(c.Dst, bytes.NewReader(c.Data)); err != nil {
				return st, fmt.Errorf("copy %s into the jail: %w", c.Src, err)
			}
			made = append(made, c.Dst)
			continue
		}
		m, err := c.From.Copy(c.Src, c.Dst, &budget)
		made = append(made, m...)
		if err != nil {
			return st, fmt.Errorf("copy %s into the jail: %w", c.Src, err)
		}
	}
	// Hand over, deepest first, so a directory becomes the run user's only
	// once everything in it has.
	slices.Reverse(made)
	for _, p := range made {
		if err := os.Lchown(p, uid, gid); err != nil {
			return st, fmt.Errorf("make the run's agent homes: %w", err)
		}
	}
	return st, nil
}

// writeNew writes what r holds into a new file dst, 0600 (never through a
// link).
func writeNew(dst string, r io.Reader) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// EmptyFile makes sure path is an empty regular file that every user can
// read (0444), in a directory others may traverse: the source the jail's
// masks are bound from. It is made once and shared by every run; a file
// that is not empty or not regular is an error, never used.
func EmptyFile(path string) error { return maskSource(path, "", "the masks' empty file") }

// CommonDir is what the masks over a missing commondir hold: the git
// directory itself, which is where git looks when there is no commondir
// (setup.c, get_common_dir_noenv). git dies on an empty commondir.
const CommonDir = ".\n"

// CommonDirFile makes sure path is a regular file holding CommonDir that
// every user can read (0444): the source the masks over a missing
// commondir are bound from (mounts.Input.CommonDirFile), made and checked
// as EmptyFile's.
func CommonDirFile(path string) error {
	return maskSource(path, CommonDir, "the commondir masks' file")
}

// GitFile makes sure path is a regular file holding "gitdir: " and
// gitdir, which every user can read (0444): the source the masks over a
// missing .git are bound from (mounts.Input.GitFile), made and checked as
// EmptyFile's. Neither agent misreads it, where they misread an empty file
// or an empty directory (measured with Claude Code 2.1.197 and Codex
// 0.169.0): git stops at it ("fatal: not a git repository: <gitdir>")
// instead of searching the directories above; Codex (its
// resolve_gitdir_from_file) finds the pointer it expects, where an empty
// file made it log "Expected …/.git to contain a gitdir pointer" a dozen
// times a run, and only stats the target, which must exist in the jail
// (agentjail's run directory, covered by an empty tmpfs); Claude Code's
// sandbox skips the paths below a file, but fails on a directory, under
// which it mounts over .git/hooks and .git/config.
func GitFile(path, gitdir string) error {
	return maskSource(path, "gitdir: "+gitdir+"\n", "the .git masks' file")
}

// maskSource makes sure path is a regular file holding content that every
// user can read, in a directory others may traverse; made once (atomically:
// concurrent runs may race, and each makes the same) and shared by every
// run. A file holding anything else is an error, never used.
func maskSource(path, content, what string) error {
	if err := traversable(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createSource(path, content); err != nil {
			return fmt.Errorf("create %s %s: %w", what, path, err)
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
	data, _ := io.ReadAll(io.LimitReader(f, int64(len(content))+1))
	if !fi.Mode().IsRegular() || string(data) != content || fi.Mode().Perm()&0o444 != 0o444 {
		return fmt.Errorf("%s should be a file every user can read holding %q, and is not (%v, %q); remove it", path, content, fi.Mode(), data)
	}
	return nil
}

func createSource(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mask-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(content)
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

// traversable creates dir if needed and, when agentjail runs as root,
// makes sure others may traverse it: agentjail's run directory may have
// been made 0700 by the state or mask registries, and bubblewrap, running
// as the run user, must reach bind sources below it. Started by another
// user, agentjail runs the jail as that user, who owns dir.
func traversable(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if os.Getuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&0o011 != 0o011 {
		if err := os.Chmod(dir, m|0o011); err != nil {
			return fmt.Errorf("make %s traversable: %w", dir, err)
		}
	}
	return nil
}

// Path is the agent-homes directory, "" for none.
func (s *AgentHomes) Path() string {
	if s == nil {
		return ""
	}
	return s.Root
}

// Remove unmounts the agent-homes directory's tmpfs mounts and deletes it and
// everything in it.
func (s *AgentHomes) Remove() error {
	if s == nil {
		return nil
	}
	return RemoveAgentHomes(s.Root)
}

// PrivateMounts moves the calling OS thread into a private copy of its
// mount namespace (unshare(2) CLONE_NEWNS, which acts on the calling thread
// only), with the host's mounts propagating into it but none of its own
// out (MS_SLAVE), and locks the calling goroutine to that thread for good:
// a thread with another mount namespace must never run other goroutines,
// so it is never unlocked, and goes when the goroutine ends
// (runtime.LockOSThread). Processes the goroutine starts inherit the copy;
// threads the runtime starts do not (since Go 1.10 it clones new threads
// from a template thread, never from a locked one).
func PrivateMounts() error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the private mount namespace a slave: %w", err)
	}
	return nil
}

// Bind mounts the directory d at target (a bind, not recursive), in the
// calling thread's mount namespace: call it on the thread that has
// PrivateMounts, with d opened there (a bind's source must be a mount of
// the caller's own namespace). The source is d's descriptor
// (/proc/self/fd), so nothing put at d's path meanwhile is bound.
func (d *Dir) Bind(target string) error {
	src := "/proc/self/fd/" + strconv.Itoa(d.fd())
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", d.Path, target, err)
	}
	return nil
}

// FDPath is a path to d from any thread, through its descriptor.
func (d *Dir) FDPath() string { return "/proc/self/fd/" + strconv.Itoa(d.fd()) }

// RemoveAgentHomes unmounts every mount under root that the calling thread
// sees, deepest first, then deletes root. (A sweep after a supervisor that
// died finds none: its private namespace died with it.) Without the mount
// table it removes nothing: a deletion would descend into what is still
// mounted there.
func RemoveAgentHomes(root string) error { return removeAgentHomes(root, mountTable) }

// removeAgentHomes is RemoveAgentHomes with the mount table from
// mountTable.
func removeAgentHomes(root string, mountTable func() ([]procs.Mount, error)) error {
	table, err := mountTable()
	if err != nil {
		return fmt.Errorf("%s is left: %w", root, err)
	}
	var points []string
	for _, m := range table {
		if m.Point == root || strings.HasPrefix(m.Point, root+"/") {
			points = append(points, m.Point)
		}
	}
	slices.Sort(points)
	slices.Reverse(points)
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	if err := os.RemoveAll(root); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// mountTable is the calling thread's mount table.
func mountTable() ([]procs.Mount, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cannot read the mount table: %w", err)
	}
	defer f.Close()
	table, err := procs.ParseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the mount table: %w", err)
	}
	return table, nil
}

// openOwned opens the file rel below root that the run user left there, as
// agentjail (root) must: resolved beneath root without following any
// symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, so no path
// component can be swapped for a link meanwhile), and only a regular file
// with one link owned by uid (not a hard link to someone else's file), of at
// most max bytes.
func openOwned(root, rel string, uid int, max int64) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	name := filepath.Join(root, rel)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: the final component at least is never a link.
		fd, err = unix.Openat(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	switch {
	case err != nil:
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%s is not a regular file", name)
	case int(st.Uid) != uid || st.Nlink != 1:
		err = fmt.Errorf("%s is not a file of the run user's own (owner %d, %d links)", name, st.Uid, st.Nlink)
	case st.Size > max:
		err = fmt.Errorf("%s is %d bytes, more than the %d agentjail copies", name, st.Size, max)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// The caps of what one run's --results copies: the agent chooses how many
// transcripts it leaves and how large, and must not fill the operator's
// disk with them.
const (
	MaxTranscripts     = 1000    // files
	MaxTranscriptBytes = 1 << 30 // bytes, all files together
)

// maxSkipLines bounds the lines CopyTranscripts returns about single
// files: the agent chooses how many there are.
const maxSkipLines = 10

// CopyTranscripts copies the session transcripts Claude Code left in its
// directory dir (projects/<project>/<session>.jsonl, and what lies below a
// session: its subagents' transcripts) into results, as <session>.jsonl
// and so on, owned by the owner of results, 0600: the sessions first, then
// what lies below them, each in name order, up to maxFiles files and
// maxBytes bytes in all. Nothing there is overwritten or followed: a name
// taken (by an earlier run) gets a new one (Dir.AddNew), a
// directory below results is made or entered without following a link. It
// returns the paths written, below where results is now, and one line for
// each thing it did not copy (links, files of someone else's, those past
// the caps), at most a dozen. With since set, only files changed since
// then are copied: dir keeps sessions of earlier runs (claude.dir), which
// their runs copied.
func CopyTranscripts(dir string, results *Dir, uid, maxFiles int, maxBytes int64, since time.Time) (copied, skipped []string) {
	owner, err := results.Stat()
	if err != nil {
		return nil, []string{err.Error()}
	}
	var files, overFiles, overBytes, lines int
	var bytes int64
	skip := func(err error) {
		if lines++; lines <= maxSkipLines {
			skipped = append(skipped, err.Error())
		}
	}
	projects := filepath.Join(dir, "projects")
	// Two walks, in name order: the sessions (depth 1 below a project),
	// then what lies deeper.
	for _, deeper := range []bool{false, true} {
		err := filepath.WalkDir(projects, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) || p != projects { // none: no session was saved
					skip(err)
				}
				return nil
			}
			rel, _ := filepath.Rel(projects, p)
			depth := strings.Count(rel, string(filepath.Separator))
			switch {
			case d.IsDir() && depth >= 1 && !deeper:
				return fs.SkipDir
			case d.IsDir() || depth < 1 || (depth > 1) != deeper || !strings.HasSuffix(p, ".jsonl"):
				return nil
			case !since.IsZero() && !modifiedSince(d, since):
				return nil
			case files == maxFiles:
				overFiles++
				return nil
			}
			n, dst, err := copyOut(dir, filepath.Join("projects", rel), results, uid, int(owner.Uid), int(owner.Gid), maxBytes-bytes)
			switch {
			case errors.Is(err, errOverBytes):
				overBytes++
			case err != nil:
				skip(err)
			default:
				files++
				bytes += n
				copied = append(copied, filepath.Join(results.Where(), dst))
			}
			return nil
		})
		if err != nil {
			skip(err)
		}
	}
	if lines > maxSkipLines {
		skipped = append(skipped, fmt.Sprintf("and %d more files not copied", lines-maxSkipLines))
	}
	if overFiles > 0 {
		skipped = append(skipped, fmt.Sprintf("%d transcripts not copied: a run copies at most %d", overFiles, maxFiles))
	}
	if overBytes > 0 {
		skipped = append(skipped, fmt.Sprintf("%d transcripts not copied: they would pass the %d bytes a run copies in all", overBytes, maxBytes))
	}
	return copied, skipped
}

var errOverBytes = errors.New("over the byte cap")

// modifiedSince reports whether the entry d was modified at or after t (an
// entry that cannot be read counts as changed: copyOut says why).
func modifiedSince(d fs.DirEntry, t time.Time) bool {
	fi, err := d.Info()
	return err != nil || !fi.ModTime().Before(t)
}

// copyOut copies root/rel, a transcript of the run user's (uid), into
// results as the path below its project, made new there (0600, owned by
// ownerUID:ownerGID), unless it is larger than budget (errOverBytes). It
// returns the bytes copied and the name written, relative to results.
func copyOut(root, rel string, results *Dir, uid, ownerUID, ownerGID int, budget int64) (int64, string, error) {
	in, err := openOwned(root, rel, uid, MaxTranscriptBytes)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, "", err
	}
	if fi.Size() > budget {
		return 0, "", errOverBytes
	}
	// projects/<project>/<session>.jsonl -> <session>.jsonl
	below := strings.SplitN(rel, string(filepath.Separator), 3)[2]
	dir, name := filepath.Split(below)
	out := results
	if dir != "" {
		if out, err = results.MkdirAll(dir, 0o700, ownerUID, ownerGID); err != nil {
			return 0, "", fmt.Errorf("copy %s: %w", rel, err)
		}
		defer out.Close()
	}
	name, err = out.AddNew(name, io.LimitReader(in, fi.Size()), 0o600, ownerUID, ownerGID)
	if err != nil {
		return 0, "", fmt.Errorf("copy %s: %w", rel, err)
	}
	return fi.Size(), filepath.Join(dir, name), nil
}

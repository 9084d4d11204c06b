package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// The run directory: where agentjail keeps what its runs share (the
// exec-stage copies, the mask registry, the live runs' state files and
// sockets) and each run's agent homes. Both binaries need it: agentjail, and
// agentjail-init, whose periodic sweep ends what dead runs left there.

// RunDir holds per-run state: /run/agentjail as root, else
// $XDG_RUNTIME_DIR/agentjail.
func RunDir() string {
	if os.Getuid() != 0 {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			return filepath.Join(x, "agentjail")
		}
		return filepath.Join(os.TempDir(), "agentjail-"+strconv.Itoa(os.Getuid()))
	}
	return "/run/agentjail"
}

// RunSubdirs are the directories agentjail makes in the run directory
// (the run's own agent-homes directory, named by its fresh id, is made later).
var RunSubdirs = []string{"bin", "masks", "runs", "seccomp"}

// CheckRunDir refuses a run directory that is not the caller's alone, and
// creates it (0700) when create is set and it is missing. Without
// $XDG_RUNTIME_DIR a non-root run uses /tmp/agentjail-UID, which any user
// can make first: its owner could then swap the masks' empty file, plant
// mask registry entries and control sockets, or read and redirect the
// copied credentials. So the directory, each one agentjail makes in it and the
// empty file must be owned by the caller (root's /run/agentjail by root)
// and writable by no one else, checked with lstat (a symlink is refused,
// never followed). Once that holds, nobody else can create or replace
// anything inside, and /tmp's sticky bit keeps the directory itself from
// being renamed away.
func CheckRunDir(create bool) error {
	dir := RunDir()
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err = os.Mkdir(dir, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = os.Lstat(dir)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil
	case err != nil:
		return fmt.Errorf("agentjail's run directory %s: %w; %s", dir, err, runDirFix(dir))
	}
	if err := ownedAlone(dir, fi, true); err != nil {
		return err
	}
	for _, name := range append(slices.Clone(RunSubdirs), "empty") {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("agentjail's run directory: %s: %w; %s", p, err, runDirFix(dir))
		}
		if err := ownedAlone(p, fi, name != "empty"); err != nil {
			return err
		}
	}
	return nil
}

// ownedAlone checks that p (lstat'ed as fi) is a directory (else a regular
// file), owned by the caller and writable by no one else.
func ownedAlone(p string, fi fs.FileInfo, dir bool) error {
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	var problem string
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		problem = "is a symlink"
	case dir && !fi.IsDir():
		problem = "is not a directory"
	case !dir && !fi.Mode().IsRegular():
		problem = "is not a regular file"
	case uid != os.Geteuid():
		problem = fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		problem = fmt.Sprintf("is writable by others (mode %04o)", fi.Mode().Perm())
	default:
		return nil
	}
	return fmt.Errorf("%w: %s %s: whoever made it could swap the files agentjail binds into the jail, its control sockets and the copied credentials; %s",
		ErrRunDir, p, problem, runDirFix(RunDir()))
}

// runDirFix says how to get a run directory of one's own.
func runDirFix(dir string) string {
	if os.Geteuid() == 0 {
		return fmt.Sprintf("remove it (rm -rf %s) and run agentjail again: it recreates it owned by root, mode 0711", dir)
	}
	return fmt.Sprintf("remove it (its owner or root: rm -rf %s), or set XDG_RUNTIME_DIR to a directory only you can write (such as /run/user/%d)", dir, os.Geteuid())
}

// MaskDir is the registry of mask placeholders shared by concurrent runs.
func MaskDir() string { return filepath.Join(RunDir(), "masks") }

// LiveDir holds the state files and control sockets of live runs.
func LiveDir() string { return filepath.Join(RunDir(), "runs") }

// SweepDeadRuns ends what runs whose supervisor died left behind (their
// marked processes, cgroups, homes directories, state files) and the mask
// placeholders of killed runs, and logs each process it had to kill. Runs
// of other pid namespaces are left alone (SweepDead). init calls
// it periodically, every run at its start: with nothing dead it reads one
// state file and one /proc/PID/stat per live run.
func SweepDeadRuns(logf func(string, ...any)) {
	if err := CheckRunDir(false); err != nil {
		logf("sweep: %v", err)
		return
	}
	killed, err := SweepDead(LiveDir(), "/proc")
	for id, ps := range killed {
		for _, p := range ps {
			logf("swept run %s (its supervisor died): killed pid %d (%s)", id, p.PID, p.Cmd)
		}
	}
	if err != nil {
		logf("sweep: %v", err)
	}
	if err := SweepMasks(MaskDir()); err != nil {
		logf("sweep: %v", err)
	}
}

package bwrap

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Info describes the bwrap binary in use.
type Info struct {
	Path    string  `json:"path"`
	Version Version `json:"version"`
	Setuid  bool    `json:"setuid"`
}

// cacheEntry ties a detected version to one installed binary.
type cacheEntry struct {
	Path    string  `json:"path"`
	Inode   uint64  `json:"inode"`
	Size    int64   `json:"size"`
	MtimeNs int64   `json:"mtime_ns"`
	Version Version `json:"version"`
}

// Find returns the bwrap path: $AGENTJAIL_BWRAP, else bwrap on $PATH, else
// /usr/bin/bwrap.
func Find() (string, error) {
	if p := os.Getenv("AGENTJAIL_BWRAP"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: AGENTJAIL_BWRAP=%s: %w; %s", ErrNotFound, p, err, Install)
		}
		return p, nil
	}
	if p, err := exec.LookPath("bwrap"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/bwrap"); err == nil {
		return "/usr/bin/bwrap", nil
	}
	return "", fmt.Errorf("%w on $PATH; %s", ErrNotFound, Install)
}

// Detect finds bwrap and its version, refusing releases older than Minimum.
// The version is cached in cacheDir keyed by the binary's inode, size and
// mtime, so `bwrap --version` runs once per installed binary, not per launch.
// An unwritable cacheDir only costs the probe.
func Detect(cacheDir string) (Info, error) {
	path, err := Find()
	if err != nil {
		return Info{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w; %s", ErrNotFound, path, err, Install)
	}
	sys := st.Sys().(*syscall.Stat_t)
	key := cacheEntry{Path: path, Inode: sys.Ino, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}
	info := Info{Path: path, Setuid: st.Mode()&os.ModeSetuid != 0}

	cacheFile := filepath.Join(cacheDir, "bwrap.json")
	var cached cacheEntry
	if data, err := readTrusted(cacheDir, cacheFile); err == nil && json.Unmarshal(data, &cached) == nil {
		v := cached.Version
		cached.Version = Version{}
		if cached == key {
			info.Version = v
			return info, checkMinimum(info)
		}
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return Info{}, fmt.Errorf("%w: `%s --version`: %w; %s", ErrUnusable, path, err, Install)
	}
	if info.Version, err = ParseVersion(string(out)); err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w; %s", ErrUnusable, path, err, Install)
	}
	key.Version = info.Version
	writeCache(cacheDir, cacheFile, key)
	return info, checkMinimum(info)
}

func checkMinimum(info Info) error {
	if info.Version.Less(Minimum) {
		return fmt.Errorf("%w: %s is %s, agentjail needs >= %s; %s", ErrTooOld, info.Path, info.Version, Minimum, Install)
	}
	return nil
}

// writeCache stores e atomically; failures are ignored (the cache is an
// optimisation only).
func writeCache(dir, file string, e cacheEntry) {
	data, _ := json.Marshal(e)
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".bwrap-*.json")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}

// readTrusted reads file only when it and dir are the caller's and
// writable by no one else: without $HOME a non-root cache lives in /tmp,
// where another user could plant an entry that passes an old bwrap off as
// a new one. An untrusted cache only costs the probe.
func readTrusted(dir, file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, fi := range []func() (os.FileInfo, error){f.Stat, func() (os.FileInfo, error) { return os.Lstat(dir) }} {
		st, err := fi()
		if err != nil {
			return nil, err
		}
		if int(st.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() || st.Mode().Perm()&0o022 != 0 || st.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is not the caller's alone", st.Name())
		}
	}
	return io.ReadAll(f)
}

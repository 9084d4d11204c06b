package mounts

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/policy"
)

// maxGitIndex bounds what is read of a git index for its gitlinks: an
// index larger is an error (ErrGitFile), as a config too large is, since
// the agent may write the index to hide a gitlink past what is read.
const maxGitIndex = 64 << 20

// Bounds on what an index may make the search do: gitlinks kept, and a
// gitlink's name (a longer path cannot be opened). An index of version 4
// repeats a long name for a few bytes an entry.
const (
	maxGitlinks    = 10000
	maxGitlinkName = 4096
)

// skippedLinks handles the gitlinks (submodules entered in the index) of
// the work tree top, whose git directory is g, that lie where the walk
// does not go (skipDirs: node_modules): git goes there for `git status`
// at the top (a repository the agent made in node_modules/x and entered
// with `git update-index --cacheinfo 160000,...`), so each is handled as a
// repository the walk found. Where top lies in such a directory itself,
// every gitlink does. An index is read only where the walk skipped a
// directory below top, or top lies in one: elsewhere no gitlink can lead
// where the walk did not go (a repository made there during the run is
// moved aside after it: hostfs.ScanAfterRun), and a large repository's
// index is not read at every launch for nothing.
func (f *finder) skippedLinks(g, top string) {
	skipped := slices.ContainsFunc(f.skipped, func(s string) bool { return under(top, s) })
	if !skipped && !slices.ContainsFunc(f.skipped, func(s string) bool { return under(s, top) }) {
		return
	}
	hashLen := 20
	if gd := f.git.dirs[g]; gd != nil && slices.ContainsFunc(gd.vars, func(v gitVar) bool {
		return v.name == "extensions.objectformat" && strings.EqualFold(v.value, "sha256")
	}) {
		hashLen = 32
	}
	wanted := func(name []byte) bool {
		return len(name) <= maxGitlinkName && (skipped || slices.ContainsFunc(strings.Split(string(name), "/"), func(e string) bool { return slices.Contains(skipDirs, e) })) &&
			underAny(path.Join(top, string(name)), f.roots)
	}
	var repos []string // in index order, each once
	kept := map[string]bool{}
	replaced, over := false, false
	keep := func(name []byte) {
		switch {
		case kept[string(name)]:
		case len(kept) == maxGitlinks:
			over = true
		default:
			kept[string(name)] = true
			repos = append(repos, string(name))
		}
	}
	gitlink := func(mode uint32, name []byte) {
		switch {
		case !isGitlink(mode):
		case len(name) == 0:
			// A split index's entry that replaces one of its shared
			// index's, which has the name (the replace bitmap says
			// which: not read here).
			replaced = true
		case wanted(name):
			keep(name)
		}
	}
	shared, ok := f.indexEntries(path.Join(g, "index"), hashLen, gitlink)
	if !ok {
		return
	}
	// A split index (core.splitIndex, or a link extension alone) holds
	// only what changed since its shared index, sharedindex.<id> beside
	// it, which holds the rest. Where the split part made a gitlink of a
	// shared entry, every shared entry where a repository is may be it.
	if len(shared) >= hashLen {
		f.indexEntries(path.Join(g, "sharedindex."+hex.EncodeToString(shared[:hashLen])), hashLen, func(mode uint32, name []byte) {
			gitlink(mode, name)
			if replaced && !isGitlink(mode) && len(name) > 0 && wanted(name) && exists(f.d, path.Join(top, string(name), ".git")) {
				keep(name)
			}
		})
	}
	if over {
		// The index is the agent's to write: the fix keeps the project.
		idx := path.Join(g, "index")
		f.pr.errs = append(f.pr.errs, fmt.Errorf("%w: the git index %s names more than %d submodules where the search does not go (node_modules); if they are not the project's, remove the index and let git rebuild it from HEAD: `rm -f %s %s; git reset`",
			ErrGitFile, policy.Quote(idx), maxGitlinks, policy.ShellQuote(idx), policy.ShellQuote(path.Join(g, "sharedindex."))+"*"))
		return
	}
	for _, l := range repos {
		f.repo(path.Join(top, l))
	}
}

// isGitlink reports whether an index entry's mode is a gitlink's
// (160000: a submodule's commit).
func isGitlink(mode uint32) bool { return mode&0o170000 == 0o160000 }

// indexEntries reads the index at p (Documentation/gitformat-index.txt,
// versions 2 to 4, object ids of hashLen bytes) and calls each with every
// entry's mode and name (valid only during the call). It returns what the
// link extension holds (a split index's: its shared index's object id
// first), nil without one; ok is false where there is no index, or an
// error was recorded. What cannot be read ends the entries.
func (f *finder) indexEntries(p string, hashLen int, each func(mode uint32, name []byte)) (shared []byte, ok bool) {
	file, t, err := openFile(f.d, p, maxGitIndex)
	if file == nil {
		if err != nil {
			f.pr.errs = append(f.pr.errs, err)
		}
		return nil, false
	}
	defer file.Close()
	// Read as it is parsed: an index of many megabytes is not held.
	r := &io.LimitedReader{R: file, N: maxGitIndex + 1}
	shared = readIndex(r, hashLen, each)
	if r.N == 0 { // it grew past the limit since the lstat
		f.pr.errs = append(f.pr.errs, tooLarge(t, maxGitIndex+1, maxGitIndex))
		return nil, false
	}
	return shared, true
}

// gitlinks returns the names of the gitlink entries (mode 160000) of a
// SHA-1 index read from r, and what its link extension holds.
func gitlinks(r io.Reader) (links []string, shared []byte) {
	shared = readIndex(r, 20, func(mode uint32, name []byte) {
		if isGitlink(mode) {
			links = append(links, string(name))
		}
	})
	return links, shared
}

// readIndex is indexEntries of what r holds.
func readIndex(r io.Reader, hashLen int, each func(mode uint32, name []byte)) (shared []byte) {
	br := bufio.NewReaderSize(r, 64<<10)
	fixed := make([]byte, 40+hashLen+4)
	if _, err := io.ReadFull(br, fixed[:12]); err != nil || string(fixed[:4]) != "DIRC" {
		return nil
	}
	version := binary.BigEndian.Uint32(fixed[4:8])
	n := binary.BigEndian.Uint32(fixed[8:12])
	// name is the entry's name; a version 4 name is the one before it
	// with strip bytes cut from its end.
	var name []byte
	for range n {
		// ctime, mtime, dev, ino (24 bytes), mode, uid, gid, size, the
		// object id and the flags.
		size := 40 + hashLen + 2
		if _, err := io.ReadFull(br, fixed[:size]); err != nil {
			return nil
		}
		mode := binary.BigEndian.Uint32(fixed[24:28])
		flags := binary.BigEndian.Uint16(fixed[size-2 : size])
		if flags&0x4000 != 0 {
			// Extended flags: git reads them in any version
			// (read-cache.c, create_from_disk).
			size += 2
			if _, err := io.ReadFull(br, fixed[size-2:size]); err != nil {
				return nil
			}
		}
		var ok bool
		if version == 4 {
			strip, k := offsetVarint(br)
			if k == 0 || strip > uint64(len(name)) {
				return nil
			}
			if name, ok = readToNUL(br, name[:len(name)-int(strip)]); !ok {
				return nil
			}
		} else {
			// The name's length is in the flags (git reads it so: a name
			// with a NUL in it must not put the reading out of step),
			// but for one of 0xfff bytes or more, which ends at a NUL;
			// 1 to 8 NULs pad the entry to a multiple of 8.
			l := int(flags & 0xfff)
			read := size + l
			if l == 0xfff {
				name, ok = readToNUL(br, name[:0])
				l, read = len(name), size+len(name)+1
			} else {
				name = slices.Grow(name[:0], l)[:l]
				_, err := io.ReadFull(br, name)
				ok = err == nil
			}
			if !ok {
				return nil
			}
			if _, err := br.Discard((size+l+8)&^7 - read); err != nil {
				return nil
			}
		}
		each(mode, name)
	}
	// The extensions, each a signature and a size, up to the checksum
	// (which reads as none).
	for {
		if _, err := io.ReadFull(br, fixed[:8]); err != nil {
			return nil
		}
		size := binary.BigEndian.Uint32(fixed[4:8])
		if string(fixed[:4]) == "link" {
			link := make([]byte, min(size, 32))
			if _, err := io.ReadFull(br, link); err != nil {
				return nil
			}
			return link
		}
		if _, err := br.Discard(int(size)); err != nil {
			return nil
		}
	}
}

// readToNUL appends to buf what br holds up to a NUL, which it takes too.
func readToNUL(br *bufio.Reader, buf []byte) ([]byte, bool) {
	for {
		chunk, err := br.ReadSlice(0)
		switch err {
		case nil:
			return append(buf, chunk[:len(chunk)-1]...), true
		case bufio.ErrBufferFull:
			buf = append(buf, chunk...)
		default:
			return buf, false
		}
	}
}

// offsetVarint decodes git's offset varint (varint.c) from br, returning
// the value and the bytes it took (0: none could be read).
func offsetVarint(br io.ByteReader) (uint64, int) {
	var v uint64
	for i := 1; i <= 10; i++ {
		b, err := br.ReadByte()
		if err != nil {
			return 0, 0
		}
		if i > 1 {
			v++
		}
		v = v<<7 | uint64(b&0x7f)
		if b&0x80 == 0 {
			return v, i
		}
	}
	return 0, 0
}

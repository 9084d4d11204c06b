package mounts

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"path"
	"slices"
	"strings"
)

// maxGitIndex bounds what is read of a git index for its gitlinks: an
// index larger is an error (ErrGitFile), as a config too large is, since
// the agent may write the index to hide a gitlink past what is read.
const maxGitIndex = 64 << 20

// skippedLinks handles the gitlinks (submodules entered in the index) of
// the work tree top, whose git directory is g, that lie where the walk
// does not go (skipDirs: node_modules): git goes there for `git status`
// at the top (a repository the agent made in node_modules/x and entered
// with `git update-index --cacheinfo 160000,...`), so each is handled as a
// repository the walk found. An index is read only where the walk skipped
// a directory below top, or top lies in one: elsewhere no gitlink can lead
// where the walk did not go (a repository made there during the run is
// moved aside after it: hostfs.ScanAfterRun), and a large repository's
// index is not read at every launch for nothing.
func (f *finder) skippedLinks(g, top string) {
	if !slices.ContainsFunc(f.skipped, func(s string) bool { return under(s, top) || under(top, s) }) {
		return
	}
	links, shared, ok := f.indexLinks(path.Join(g, "index"))
	if !ok {
		return
	}
	// A split index (core.splitIndex) holds only what changed since its
	// shared index, sharedindex.<id> beside it, which holds the rest.
	for _, size := range []int{20, 32} { // SHA-1 or SHA-256
		if len(shared) >= size {
			more, _, ok := f.indexLinks(path.Join(g, "sharedindex."+hex.EncodeToString(shared[:size])))
			links = append(links, more...)
			if ok {
				break
			}
		}
	}
	for _, l := range links {
		if slices.ContainsFunc(strings.Split(l, "/"), func(e string) bool { return slices.Contains(skipDirs, e) }) {
			if p := path.Join(top, l); underAny(p, f.roots) {
				f.repo(p)
			}
		}
	}
}

// indexLinks reads the index at p for gitlinks: ok is false where there
// is none, or an error was recorded.
func (f *finder) indexLinks(p string) (links []string, shared []byte, ok bool) {
	file, t, err := openFile(f.d, p, maxGitIndex)
	if file == nil {
		if err != nil {
			f.pr.errs = append(f.pr.errs, err)
		}
		return nil, nil, false
	}
	// Read as it is parsed: an index of many megabytes is not held.
	r := &io.LimitedReader{R: file, N: maxGitIndex + 1}
	links, shared = gitlinks(r)
	file.Close()
	if r.N == 0 { // it grew past the limit since the lstat
		f.pr.errs = append(f.pr.errs, tooLarge(t, maxGitIndex+1, maxGitIndex))
		return nil, nil, false
	}
	return links, shared, true
}

// gitlinks returns the paths of the gitlink entries (mode 160000) of a
// git index read from r (Documentation/gitformat-index.txt, versions 2 to
// 4), and what its link extension holds (a split index's: its shared
// index's object id first), nil without one; what cannot be read ends the
// list.
func gitlinks(r io.Reader) (links []string, shared []byte) {
	br := bufio.NewReaderSize(r, 64<<10)
	var fixed [64]byte
	if _, err := io.ReadFull(br, fixed[:12]); err != nil || string(fixed[:4]) != "DIRC" {
		return nil, nil
	}
	version := binary.BigEndian.Uint32(fixed[4:8])
	n := binary.BigEndian.Uint32(fixed[8:12])
	var out []string
	// name is the entry's name; a version 4 name is the one before it
	// with strip bytes cut from its end. Only a gitlink's is made a
	// string.
	var name []byte
	for range n {
		size := 62
		if _, err := io.ReadFull(br, fixed[:size]); err != nil {
			return out, nil
		}
		mode := binary.BigEndian.Uint32(fixed[24:28])
		flags := binary.BigEndian.Uint16(fixed[60:62])
		if version >= 3 && flags&0x4000 != 0 {
			size += 2 // extended flags
			if _, err := io.ReadFull(br, fixed[62:size]); err != nil {
				return out, nil
			}
		}
		var ok bool
		if version == 4 {
			strip, k := offsetVarint(br)
			if k == 0 || strip > uint64(len(name)) {
				return out, nil
			}
			if name, ok = readToNUL(br, name[:len(name)-int(strip)]); !ok {
				return out, nil
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
				return out, nil
			}
			if _, err := br.Discard((size+l+8)&^7 - read); err != nil {
				return out, nil
			}
		}
		if mode&0o170000 == 0o160000 {
			out = append(out, string(name))
		}
	}
	// The extensions, each a signature and a size, up to the checksum
	// (which reads as none).
	for {
		if _, err := io.ReadFull(br, fixed[:8]); err != nil {
			return out, nil
		}
		size := binary.BigEndian.Uint32(fixed[4:8])
		if string(fixed[:4]) == "link" {
			link := make([]byte, min(size, 32))
			if _, err := io.ReadFull(br, link); err != nil {
				return out, nil
			}
			return out, link
		}
		if _, err := br.Discard(int(size)); err != nil {
			return out, nil
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

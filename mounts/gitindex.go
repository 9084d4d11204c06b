package mounts

import (
	"bytes"
	"encoding/binary"
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
	data, err := readFileMax(f.d, path.Join(g, "index"), maxGitIndex)
	if err != nil {
		f.pr.errs = append(f.pr.errs, err)
		return
	}
	for _, l := range gitlinks(data) {
		if slices.ContainsFunc(strings.Split(l, "/"), func(e string) bool { return slices.Contains(skipDirs, e) }) {
			if p := path.Join(top, l); underAny(p, f.roots) {
				f.repo(p)
			}
		}
	}
}

// gitlinks returns the paths of the gitlink entries (mode 160000) of a
// git index (Documentation/gitformat-index.txt, versions 2 to 4); what
// cannot be read ends the list.
func gitlinks(data []byte) []string {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil
	}
	version := binary.BigEndian.Uint32(data[4:8])
	n := binary.BigEndian.Uint32(data[8:12])
	var out []string
	prev := ""
	off := 12
	for range n {
		if off+62 > len(data) {
			return out
		}
		mode := binary.BigEndian.Uint32(data[off+24 : off+28])
		flags := binary.BigEndian.Uint16(data[off+60 : off+62])
		p := off + 62
		if version >= 3 && flags&0x4000 != 0 {
			p += 2 // extended flags
		}
		if p > len(data) {
			return out
		}
		var name string
		if version == 4 {
			// The name is the previous one with strip bytes cut from
			// its end, and what follows, NUL-terminated.
			strip, k := offsetVarint(data[p:])
			if k == 0 || strip > uint64(len(prev)) {
				return out
			}
			p += k
			end := bytes.IndexByte(data[p:], 0)
			if end < 0 {
				return out
			}
			name = prev[:len(prev)-int(strip)] + string(data[p:p+end])
			off = p + end + 1
		} else {
			// The name's length is in the flags (git reads it so: a name
			// with a NUL in it must not put the reading out of step),
			// but for one of 0xfff bytes or more, which ends at a NUL.
			end := int(flags & 0xfff)
			if end == 0xfff {
				if end = bytes.IndexByte(data[p:], 0); end < 0 {
					return out
				}
			}
			if p+end > len(data) {
				return out
			}
			name = string(data[p : p+end])
			// 1 to 8 NULs pad the entry to a multiple of 8.
			off += (p + end - off + 8) &^ 7
		}
		prev = name
		if mode&0o170000 == 0o160000 {
			out = append(out, name)
		}
	}
	return out
}

// offsetVarint decodes git's offset varint (varint.c), returning the value
// and the bytes it took (0: none could be read).
func offsetVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	v := uint64(b[0] & 0x7f)
	i := 1
	for b[i-1]&0x80 != 0 {
		if i >= len(b) || i > 9 {
			return 0, 0
		}
		v = (v+1)<<7 | uint64(b[i]&0x7f)
		i++
	}
	return v, i
}

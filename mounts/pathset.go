package mounts

import "strings"

// PathSet is a set of absolute paths that answers, in the depth of the
// path asked about, whether a member is that path or lies above it
// (Covers), or lies below it (HasBelow): what a check after a run asks of
// every path it found, which a scan of a list made quadratic in the paths
// an agent can make by the hundred thousand.
type PathSet struct {
	in    map[string]bool
	above map[string]bool // every directory a member lies below
}

// NewPathSet is a set of paths.
func NewPathSet(paths ...string) *PathSet {
	s := &PathSet{in: map[string]bool{}, above: map[string]bool{}}
	for _, p := range paths {
		s.Add(p)
	}
	return s
}

// Add adds p.
func (s *PathSet) Add(p string) {
	s.in[p] = true
	for d := parent(p); d != "" && !s.above[d]; d = parent(d) {
		s.above[d] = true
	}
}

// Has reports whether p is a member.
func (s *PathSet) Has(p string) bool { return s.in[p] }

// Covers reports whether p or a directory above it is a member.
func (s *PathSet) Covers(p string) bool {
	for q := p; q != ""; q = parent(q) {
		if s.in[q] {
			return true
		}
	}
	return false
}

// HasBelow reports whether a member lies below p.
func (s *PathSet) HasBelow(p string) bool { return s.above[p] }

// parent is the directory p lies in, "" for "/" (and for a relative name
// without one).
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0 || p == "/":
		return ""
	case i == 0:
		return "/"
	}
	return p[:i]
}

package bwrap

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a bubblewrap release, e.g. {0, 8, 0}.
type Version struct{ Major, Minor, Patch int }

// Minimum is the oldest bubblewrap agentjail drives: 0.8.0 brought
// --disable-userns, and every other flag agentjail uses is older.
var Minimum = Version{0, 8, 0}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// ParseVersion reads `bwrap --version` output ("bubblewrap 0.8.0").
func ParseVersion(out string) (Version, error) {
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "bubblewrap" {
		return Version{}, fmt.Errorf("unexpected `bwrap --version` output %q", strings.TrimSpace(out))
	}
	parts := strings.SplitN(f[1], ".", 3)
	var n [3]int
	for i, p := range parts {
		// Distributions append suffixes ("0.9.0-1ubuntu1"); keep the digits.
		end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' })
		if end == 0 {
			return Version{}, fmt.Errorf("unexpected bubblewrap version %q", f[1])
		}
		if end > 0 {
			p = p[:end]
		}
		n[i], _ = strconv.Atoi(p)
	}
	return Version{n[0], n[1], n[2]}, nil
}

// since lists the release that introduced each flag agentjail may emit.
var since = map[string]Version{
	"--add-seccomp-fd":         {0, 5, 0},
	"--assert-userns-disabled": {0, 8, 0},
	"--disable-userns":         {0, 8, 0},
	"--json-status-fd":         {0, 4, 0},
	"--perms":                  {0, 5, 0},
	"--size":                   {0, 5, 0},
	"--chmod":                  {0, 5, 0},
	"--clearenv":               {0, 5, 0},
	"--argv0":                  {0, 9, 0},
	"--level-prefix":           {0, 11, 0},
}

// Supports reports whether v understands flag. Flags not in the table are
// older than any supported release.
func (v Version) Supports(flag string) bool {
	s, ok := since[flag]
	return !ok || !v.Less(s)
}

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

// flag is what agentjail knows of one bwrap option: the release that
// introduced it and how many arguments follow it.
type flag struct {
	since Version
	args  int
}

// flags lists every option agentjail may emit (mounts.Render), each with
// the bubblewrap release that introduced it, from bubblewrap's NEWS and
// pull requests: --perms is containers/bubblewrap#406 (0.5.0), --size #509
// (0.7.0), --disable-userns and --assert-userns-disabled 0.8.0 (the
// Minimum). Options older than 0.4.0 are from bubblewrap's early releases
// (0.1.x to 0.3.x). A test renders every built-in profile and requires each
// option it emits to be listed here and supported by Minimum; Check refuses
// a plan whose options the detected bwrap lacks.
var flags = map[string]flag{
	"--add-seccomp-fd":         {Version{0, 5, 0}, 1},
	"--argv0":                  {Version{0, 9, 0}, 1},
	"--assert-userns-disabled": {Version{0, 8, 0}, 0},
	"--bind":                   {Version{0, 1, 0}, 2},
	"--block-fd":               {Version{0, 1, 8}, 1},
	"--cap-add":                {Version{0, 2, 0}, 1},
	"--cap-drop":               {Version{0, 2, 0}, 1},
	"--chdir":                  {Version{0, 1, 0}, 1},
	"--chmod":                  {Version{0, 5, 0}, 2},
	"--clearenv":               {Version{0, 5, 0}, 0},
	"--dev":                    {Version{0, 1, 0}, 1},
	"--die-with-parent":        {Version{0, 1, 8}, 0},
	"--disable-userns":         {Version{0, 8, 0}, 0},
	"--gid":                    {Version{0, 1, 0}, 1},
	"--json-status-fd":         {Version{0, 4, 0}, 1},
	"--level-prefix":           {Version{0, 11, 0}, 0},
	"--new-session":            {Version{0, 1, 5}, 0},
	"--perms":                  {Version{0, 5, 0}, 1},
	"--proc":                   {Version{0, 1, 0}, 1},
	"--remount-ro":             {Version{0, 1, 3}, 1},
	"--ro-bind":                {Version{0, 1, 0}, 2},
	"--ro-bind-try":            {Version{0, 1, 3}, 2},
	"--setenv":                 {Version{0, 1, 0}, 2},
	"--size":                   {Version{0, 7, 0}, 1},
	"--symlink":                {Version{0, 1, 0}, 2},
	"--tmpfs":                  {Version{0, 1, 0}, 1},
	"--uid":                    {Version{0, 1, 0}, 1},
	"--unshare-ipc":            {Version{0, 1, 0}, 0},
	"--unshare-net":            {Version{0, 1, 0}, 0},
	"--unshare-pid":            {Version{0, 1, 0}, 0},
	"--unshare-user":           {Version{0, 1, 0}, 0},
	"--unshare-uts":            {Version{0, 1, 0}, 0},
}

// Supports reports whether v understands option, an option listed in
// flags; an unlisted one is not known to be supported.
func (v Version) Supports(option string) bool {
	f, ok := flags[option]
	return ok && !v.Less(f.since)
}

// Options returns the options of args (bwrap's argv after argv[0]) up to
// the "--" before the command, without their arguments, or an error naming
// the first one agentjail does not know.
func Options(args []string) ([]string, error) {
	var out []string
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		f, ok := flags[args[i]]
		if !ok {
			return out, fmt.Errorf("%w: %q is not in agentjail's table of bwrap options", ErrUnknownOption, args[i])
		}
		out = append(out, args[i])
		i += f.args
	}
	return out, nil
}

// Check returns an error naming the first option of args that v does not
// support, with the release that brought it.
func (v Version) Check(args []string) error {
	opts, err := Options(args)
	if err != nil {
		return err
	}
	for _, o := range opts {
		if !v.Supports(o) {
			return fmt.Errorf("%w: bubblewrap %s lacks %s (since %s); %s", ErrTooOld, v, o, flags[o].since, Install)
		}
	}
	return nil
}

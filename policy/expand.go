package policy

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Vars are the values path variables expand to.
type Vars struct {
	// SecretHomes are every home whose secrets are at stake: the invoking
	// user's, $SUDO_USER's and the run user's. A ~ in deny, protect and
	// seccomp entries means each of them.
	SecretHomes []string
	// RunHome is the run user's home, which ~ means in read and write.
	RunHome string
	// PWD is the directory the jail starts in.
	PWD string
}

// Expand returns p with ~, ${HOME} and ${PWD} expanded in every path list.
// Validate first: Expand assumes every path has an allowed form. Origins
// follow the entries to their new indices.
func Expand(p Policy, v Vars) Policy {
	out := clonePolicy(p)
	out.Origins = maps.Clone(p.Origins)
	out.Fields = maps.Clone(p.Fields)
	fs := &out.Filesystem
	fs.Read = expandList(p, &out, "filesystem.read", p.Filesystem.Read, []string{v.RunHome}, v.PWD)
	fs.Write = expandList(p, &out, "filesystem.write", p.Filesystem.Write, []string{v.RunHome}, v.PWD)
	fs.Protect = expandList(p, &out, "filesystem.protect", p.Filesystem.Protect, v.SecretHomes, v.PWD)
	fs.Deny = expandList(p, &out, "filesystem.deny", p.Filesystem.Deny, v.SecretHomes, v.PWD)
	out.Seccomp.Files = expandList(p, &out, "seccomp.files", p.Seccomp.Files, []string{v.RunHome}, v.PWD)
	return out
}

// expandList expands each entry of p's list field, in (one entry may
// become several, one per home), and moves its origin and its name in its
// file along in out. Relative entries (protect patterns) stay as they are.
func expandList(p Policy, out *Policy, field string, in []string, homes []string, pwd string) []string {
	if len(in) == 0 {
		return in
	}
	at := func(i int) string { return field + "[" + strconv.Itoa(i) + "]" }
	for i := range in {
		delete(out.Origins, at(i))
		delete(out.Fields, at(i))
	}
	var list []string
	for i, s := range in {
		for _, e := range ExpandPath(s, homes, pwd) {
			if slices.Contains(list, e) {
				continue
			}
			if o := p.Origins[at(i)]; o != "" {
				if out.Origins == nil {
					out.Origins = Origins{}
				}
				out.Origins[at(len(list))] = o
			}
			if local := p.FieldName(at(i)); local != at(len(list)) {
				if out.Fields == nil {
					out.Fields = map[string]string{}
				}
				out.Fields[at(len(list))] = local
			}
			list = append(list, e)
		}
	}
	return list
}

// ExpandPath expands one path. A ~ or ${HOME} prefix yields one path per
// home; ${PWD} is the start directory. Results are cleaned.
func ExpandPath(s string, homes []string, pwd string) []string {
	rest, isHome := cutHome(s)
	if isHome {
		var out []string
		for _, h := range homes {
			if h == "" {
				continue
			}
			out = append(out, filepath.Clean(h+"/"+rest))
		}
		return out
	}
	if r, ok := strings.CutPrefix(s, "${PWD}"); ok && (r == "" || r[0] == '/') {
		return []string{filepath.Clean(pwd + r)}
	}
	if filepath.IsAbs(s) {
		return []string{filepath.Clean(s)}
	}
	return []string{s}
}

// cutHome splits "~/x" or "${HOME}/x" into "x".
func cutHome(s string) (string, bool) {
	for _, pre := range []string{"~", "${HOME}"} {
		if r, ok := strings.CutPrefix(s, pre); ok && (r == "" || r[0] == '/') {
			return strings.TrimPrefix(r, "/"), true
		}
	}
	return "", false
}

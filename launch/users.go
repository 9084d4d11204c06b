package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
)

// account is one user, as the user database has it.
type account struct {
	Name     string
	UID, GID int
	Home     string
	// Groups are the supplementary group ids (the primary one excluded).
	Groups []int
}

// userDB looks users up in ETC/passwd and ETC/group first, then through
// the system's NSS (os/user, which loads the modules nsswitch.conf names)
// for those the files do not hold: LDAP, SSSD, systemd's dynamic users.
// Reading the files directly spares a launch loading NSS modules (about a
// millisecond with Debian's libnss_systemd), and "files" comes first in
// every default nsswitch.conf, so the answer is the same.
type userDB struct{ etc string }

var users = userDB{etc: "/etc"}

// lookup finds a user by uid when spec is numeric, else by name.
func (db userDB) lookup(spec string) (account, error) {
	if a, ok := db.fromFiles(spec); ok {
		return a, nil
	}
	var u *user.User
	var err error
	if _, nerr := strconv.Atoi(spec); nerr == nil {
		u, err = user.LookupId(spec)
	} else {
		u, err = user.Lookup(spec)
	}
	if err != nil {
		return account{}, err
	}
	a := account{Name: u.Username, Home: u.HomeDir}
	a.UID, _ = strconv.Atoi(u.Uid)
	a.GID, _ = strconv.Atoi(u.Gid)
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != a.GID {
				a.Groups = append(a.Groups, g)
			}
		}
	}
	return a, nil
}

// fromFiles answers from ETC/passwd and ETC/group, or false.
func (db userDB) fromFiles(spec string) (account, bool) {
	passwd, err := os.ReadFile(filepath.Join(db.etc, "passwd"))
	if err != nil {
		return account{}, false
	}
	var a account
	found := false
	eachLine(passwd, func(f []string) bool {
		// name:password:uid:gid:gecos:home:shell (passwd(5)); a leading
		// + or - is NIS compat syntax, left to NSS.
		if len(f) < 7 || strings.HasPrefix(f[0], "+") || strings.HasPrefix(f[0], "-") || f[0] != spec && f[2] != spec {
			return true
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			return true
		}
		a, found = account{Name: f[0], UID: uid, GID: gid, Home: f[5]}, true
		return false
	})
	if !found {
		return account{}, false
	}
	if group, err := os.ReadFile(filepath.Join(db.etc, "group")); err == nil {
		eachLine(group, func(f []string) bool {
			// name:password:gid:member,member (group(5))
			if len(f) < 4 || !slices.Contains(strings.Split(f[3], ","), a.Name) {
				return true
			}
			if g, err := strconv.Atoi(f[2]); err == nil && g != a.GID && !slices.Contains(a.Groups, g) {
				a.Groups = append(a.Groups, g)
			}
			return true
		})
	}
	return a, true
}

// eachLine calls f with the colon-separated fields of each line until f
// returns false.
func eachLine(data []byte, f func([]string) bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] != '#' && !f(strings.Split(line, ":")) {
			return
		}
	}
}

// ErrNoRunUser is a run user that does not exist: bad input, as a flag's
// mistake is.
var ErrNoRunUser = errors.New("run user")

// lookupUser resolves the chosen run user in the user database. A numeric
// uid without an entry is allowed (containers often have none).
func lookupUser(c policy.UserChoice) (mounts.User, error) {
	a, err := users.lookup(c.Spec)
	if err != nil {
		uid, nerr := strconv.Atoi(c.Spec)
		if nerr != nil || uid < 0 {
			return mounts.User{}, fmt.Errorf("%w %q (chosen by %s) does not exist: %w; pass --user with an existing user or uid", ErrNoRunUser, c.Spec, c.Why, err)
		}
		a = account{Name: c.Spec, UID: uid, GID: uid, Home: "/nonexistent"}
	}
	if g, err := strconv.Atoi(c.GID); err == nil {
		a.GID = g
	}
	return mounts.User{UID: a.UID, GID: a.GID, Name: a.Name, Home: a.Home, Groups: a.Groups, Why: c.Why}, nil
}

// homeOf is the home of a user name or uid, or "" when unknown.
func homeOf(spec string) string {
	if a, err := users.lookup(spec); err == nil {
		return a.Home
	}
	return ""
}

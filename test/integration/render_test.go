package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRenderedLineRuns: the line `agentjail render` prints runs with sh
// when its comments are followed, and nothing more is done: as the run
// user (the setpriv prefix the header gives root), after making the paths
// the header lists (<run-id> replaced by a fresh name), without the flags
// `# fds:` names. The command then runs in the jail (pid 1 is bwrap, it
// is the run user, the protected .env is read-only, its writable root is
// writable), and removing the placeholders the header lists restores the
// workspace.
func TestRenderedLineRuns(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	write(t, ws, map[string]string{".env": "SECRET=1\n"})
	before := treeHash(t, ws)
	r := aj(t, "render", "--user", strconv.Itoa(runUID), "--write", ws, "--chdir", ws, "--",
		"sh", "-c", "id -u; cat /proc/1/comm; (echo x >> .env) 2>/dev/null || echo protected; echo inside > ran")
	wantCode(t, r, 0)

	runID := "render-test-" + token()
	unquote := func(s string) string {
		return strings.ReplaceAll(strings.Trim(s, "'"), "<run-id>", runID)
	}
	var prefix, line string
	var placeholders []string
	section := ""
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		item, isItem := strings.CutPrefix(l, "#   ")
		switch {
		case !strings.HasPrefix(l, "#"):
			line = strings.ReplaceAll(l, "<run-id>", runID)
		case strings.HasPrefix(l, "# fds: "):
			flags, _, _ := strings.Cut(strings.TrimPrefix(l, "# fds: "), ": ")
			for _, f := range strings.Split(flags, ", ") {
				if !strings.Contains(line, " "+f) {
					t.Fatalf("# fds: names %q, which the line lacks:\n%s", f, r.stdout)
				}
				line = strings.Replace(line, " "+f, "", 1)
			}
			// A proxy jail's listeners for the broker, which the comment
			// says to remove too.
			if strings.Contains(l, "remove the --listen flags too") {
				line = regexp.MustCompile(` --listen \S+`).ReplaceAllString(line, "")
			}
		case !isItem:
			section = l
		case strings.HasPrefix(item, "setpriv "):
			prefix = item
		case strings.Contains(section, "make them first"):
			p, what, _ := strings.Cut(item, ": ")
			p = unquote(p)
			switch {
			case strings.HasPrefix(what, "an empty file every user can read (mode 0444)"):
				if f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444); err == nil {
					f.Close()
				}
			case strings.HasPrefix(what, `a file holding "." and a newline, every user can read (mode 0444)`):
				os.WriteFile(p, []byte(".\n"), 0o444)
			case strings.HasPrefix(what, `a file holding "gitdir: `):
				target, _, _ := strings.Cut(strings.TrimPrefix(what, `a file holding "`), `"`)
				os.WriteFile(p, []byte(target+"\n"), 0o444)
			case strings.HasPrefix(what, "a directory the run user can traverse (mode 0711)"):
				if err := os.Mkdir(p, 0o711); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(p) })
			case strings.HasPrefix(what, "a file owned by uid 1000 gid 1000 (in a directory of its, mode 0700) holding one per line the masks git is to ignore: "):
				_, list, _ := strings.Cut(what, "ignore: ")
				var lines []string
				for _, w := range strings.Fields(list) {
					lines = append(lines, unquote(w))
				}
				os.Mkdir(filepath.Dir(p), 0o700)
				os.Chown(filepath.Dir(p), runUID, runUID)
				if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				os.Chown(p, runUID, runUID)
			case strings.HasPrefix(what, "a directory owned by uid 1000 gid 1000, mode 0700"):
				if err := os.Mkdir(p, 0o700); err != nil {
					t.Fatal(err)
				}
				os.Chown(p, runUID, runUID)
			default:
				t.Fatalf("the header asks for something this test cannot make: %q", l)
			}
		case strings.Contains(section, "remove them after running this line"):
			for _, p := range strings.Fields(item) {
				placeholders = append(placeholders, unquote(p))
			}
		}
	}
	if prefix != "setpriv --reuid=1000 --regid=1000 --clear-groups --" || len(placeholders) == 0 {
		t.Fatalf("the header lacks the setpriv prefix or the placeholders:\n%s", r.stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", prefix+" "+line)
	sh.Env = []string{"PATH=/usr/bin:/bin"}
	sh.Dir = "/"
	out, err := sh.CombinedOutput()
	if err != nil || string(out) != "1000\nbwrap\nprotected\n" {
		t.Fatalf("the rendered line: %v\n%s\nline: %s", err, out, line)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "ran")); string(data) != "inside\n" {
		t.Errorf("the command did not write its writable root: %q", data)
	}

	os.Remove(filepath.Join(ws, "ran"))
	for _, p := range placeholders {
		if fi, err := os.Lstat(p); err == nil && (!fi.Mode().IsRegular() || fi.Size() != 0) && (!fi.IsDir() || entries(t, p) != "") {
			t.Errorf("the header lists %s as a placeholder, and it is not an empty file or directory", p)
		}
		os.Remove(p)
	}
	if treeHash(t, ws) != before {
		t.Errorf("the line left what the header does not list: the workspace holds %s", entries(t, ws))
	}
}

// TestRenderJSONLists: render --json gives every list as a list, [] when
// empty, never null.
func TestRenderJSONLists(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	r := aj(t, "render", "--json", "--user", strconv.Itoa(runUID), "--write", ws, "--chdir", ws, "--", "true")
	wantCode(t, r, 0)
	var plan map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	for _, k := range []string{"argv", "env", "masks", "warnings", "degradations"} {
		if _, ok := plan[k].([]any); !ok {
			t.Errorf("%s is %v, not a list:\n%s", k, plan[k], r.stdout)
		}
	}
}

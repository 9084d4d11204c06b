package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lowNofile runs agentjail with a hard nofile limit of 4096, below the
// 65536 every built-in profile asks for: a host where a built-in default
// is degraded whoever runs it (the exec stage, in the jail's user
// namespace, cannot raise a hard limit).
var lowNofile = []string{"prlimit", "--nofile=4096:4096", "--"}

// TestAPlainRunSaysNothing: a run that goes well prints nothing of
// agentjail's own, also where the host lowers a built-in profile's
// default (recorded, not said); a limit the operator set and the host
// lowers is said once, naming where it was set; --quiet leaves that to
// the record too.
func TestAPlainRunSaysNothing(t *testing.T) {
	jailed(t)
	inv := invocation{wrap: lowNofile}
	rp := recordPath(t)
	r := inv.run(t, "run", "--record", rp, "--", "true")
	wantCode(t, r, 0)
	rec := readRecord(t, rp, 0)
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("a plain run printed: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if !slices.ContainsFunc(rec.Degradations, func(d note) bool {
		return d.What == "rlimit.nofile" && strings.HasPrefix(d.Detail, "65536 asked, 4096 applied")
	}) {
		t.Errorf("the record lacks tier1's nofile lowered to 4096: %+v", rec.Degradations)
	}

	dir := visibleDir(t)
	profile := filepath.Join(dir, "nofile.yaml")
	write(t, dir, map[string]string{"nofile.yaml": "extends: tier1\nlimits:\n  rlimits:\n    nofile: 8192\n"})
	r = inv.run(t, "run", "--profile", profile, "--record", rp, "--", "true")
	wantCode(t, r, 0)
	rec = readRecord(t, rp, 0)
	wantDegradationsPrinted(t, r.stderr, rec, "rlimit.nofile")
	if want := "(limits.rlimits[nofile], " + profile + ":4:5)\n"; !strings.HasPrefix(r.stderr, "agentjail: degraded: rlimit.nofile: 8192 asked, 4096 applied") || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr %q, want one line on nofile ending %q", r.stderr, want)
	}

	r = inv.run(t, "run", "--quiet", "--profile", profile, "--read", "/nonexistent/agentjail-quiet", "--record", rp, "--", "true")
	wantCode(t, r, 0)
	if rec = readRecord(t, rp, 0); r.stderr != "" || len(rec.Degradations) == 0 {
		t.Errorf("--quiet printed %q; recorded %+v", r.stderr, rec.Degradations)
	}
}

// TestEveryEndingSaysSo: each ending agentjail causes ends with one line
// saying what happened and where the record is (a timeout, idle or wall;
// `agentjail stop`; a violation; a setup failure); a violation, its own
// exit code (123) after a line per violation, also with --quiet; an
// agent's own exit 123 is no violation, and only the record says so.
func TestEveryEndingSaysSo(t *testing.T) {
	jailed(t)
	ws := workspace(t)
	for _, c := range []struct {
		name   string
		args   []string
		script string
		stop   bool // ended by `agentjail stop` once the script has written stop-id
		code   int
		reason string
		lines  []string // agentjail's lines on stderr; RECORD is the record's path, … any text
	}{
		{"timeout", []string{"--timeout", "1"}, "sleep 60", false, 124, "wall_timeout",
			[]string{"agentjail: the run ended: wall limit 1s reached (exit 124); the record: RECORD"}},
		{"timeout, quiet", []string{"--timeout", "1", "--quiet", "--read", "/nonexistent/agentjail-quiet"}, "sleep 60", false, 124, "wall_timeout",
			[]string{"agentjail: the run ended: wall limit 1s reached (exit 124); the record: RECORD"}},
		{"idle timeout", []string{"--idle-timeout", "1"}, "echo working; sleep 60", false, 124, "idle_timeout",
			[]string{"agentjail: the run ended: idle limit 1s reached: no output for that long (exit 124); the record: RECORD"}},
		{"stop", []string{"--write", ws, "--chdir", ws}, `echo "$AGENTJAIL_RUN" > stop-id.tmp && mv stop-id.tmp stop-id; sleep 60`, true, 124, "stopped",
			[]string{"agentjail: the run ended: stopped by agentjail stop (exit 124); the record: RECORD"}},
		{"violation", []string{"--write", ws, "--chdir", ws}, "touch v1 && chmod g+s v1", false, 123, "violation",
			[]string{"agentjail: violation: " + filepath.Join(ws, "v1") + ": the run made it set-user/group-id…",
				"agentjail: the run ended: the checks after it found the policy violated (1 setid, listed above) (exit 123); the record: RECORD"}},
		{"violation, quiet", []string{"--quiet", "--write", ws, "--chdir", ws}, "touch v2 && chmod g+s v2", false, 123, "violation",
			[]string{"agentjail: violation: " + filepath.Join(ws, "v2") + ": the run made it set-user/group-id…",
				"agentjail: the run ended: the checks after it found the policy violated (1 setid, listed above) (exit 123); the record: RECORD"}},
		{"the agent's own 123", nil, "exit 123", false, 123, "exit", nil},
		{"setup failure", []string{"--write", "/nonexistent/agentjail-root"}, "true", false, 125, "setup_failed",
			[]string{"agentjail: --write: filesystem.write[0]: writable root /nonexistent/agentjail-root does not exist…; the record: RECORD"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rp := recordPath(t)
			args := append(append([]string{"run", "--record", rp}, c.args...), "--", "sh", "-c", c.script)
			var r result
			if c.stop {
				argv := append(append(slices.Clone(lowNofile), agentjail), args...)
				b := startCmd(t, exec.Command(argv[0], argv[1:]...), nil)
				waitFile(t, b, filepath.Join(ws, "stop-id"))
				id, _ := os.ReadFile(filepath.Join(ws, "stop-id"))
				wantCode(t, aj(t, "stop", strings.TrimSpace(string(id))), 0)
				r.code = b.wait(t)
				r.stdout, r.stderr = b.stdout.String(), b.stderr.String()
			} else {
				r = invocation{wrap: lowNofile}.run(t, args...)
			}
			wantCode(t, r, c.code)
			if rec := readRecord(t, rp, c.code); rec.Reason != c.reason {
				t.Errorf("reason %s, want %s", rec.Reason, c.reason)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n") {
				if l != "" {
					got = append(got, l)
				}
			}
			ok := len(got) == len(c.lines)
			for i := 0; ok && i < len(got); i++ {
				parts := strings.Split(strings.ReplaceAll(c.lines[i], "RECORD", rp), "…")
				for j, p := range parts {
					parts[j] = regexp.QuoteMeta(p)
				}
				ok = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got[i])
			}
			if !ok {
				t.Errorf("stderr:\n%s\nwant the lines\n%s", r.stderr, strings.Join(c.lines, "\n"))
			}
		})
	}
}

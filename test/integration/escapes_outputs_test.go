package integration

// The operator's outputs in a writable root (issue 14, item 1): what
// agentjail writes for the operator (--record, --log, --results) must not
// follow or trust what an agent planted there, in this run or an earlier
// one. Each test first shows the hole: with the plain approach where there
// is one (what a shell redirection does: follow the path), else that the
// agent's link is in place on the host; then that agentjail leaves the
// victim alone.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// victim is a root-only directory holding a script something may source
// later: the target of the agent's links.
func victim(t *testing.T) (dir, script string) {
	t.Helper()
	dir = visibleDir(t)
	os.Chown(dir, 0, 0)
	os.Chmod(dir, 0o700)
	script = filepath.Join(dir, "victim.sh")
	if err := os.WriteFile(script, []byte("echo harmless\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, script
}

// asUser is agentjail started by the ordinary user uid 1000 from dir,
// with its own home and run directory.
func asUser(t *testing.T, dir string) invocation {
	home, runtime := workspace(t), workspace(t)
	os.Chmod(runtime, 0o700)
	return invocation{dir: dir, env: []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + runtime}, cred: uid1000}
}

// refusedBeforeRun checks a run refused before anything ran: exit 125, one
// line on stderr holding want, and the command's marker not made.
func refusedBeforeRun(t *testing.T, r result, marker string, want ...string) {
	t.Helper()
	wantCode(t, r, 125)
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 {
		t.Errorf("%d lines on stderr, want one:\n%s", n, r.stderr)
	}
	if fileExists(marker) {
		t.Error("the command ran")
	}
}

// TestEscapeOperatorOutputsRecord: `--record ./run.json` with `--write .`.
// The agent links run.json to a root-only script (in the run itself, or in
// an earlier run); agentjail, as root, replaced the script with the record,
// which holds the agent's output. Now the link is replaced by the record
// and the script is untouched, whoever started agentjail. A file the agent
// puts at the record's path never survives as the record; a record the
// agent keeps from being written makes the exit 125; a directory as
// --record is refused before anything runs.
func TestEscapeOperatorOutputsRecord(t *testing.T) {
	jailed(t)
	payload := `$(touch /tmp/pwned)`

	// Run N plants the link. No plain-bwrap baseline: the door was
	// agentjail's own record writing (this test fails on the tree before
	// issue 14's fix); what the test can see is that the link is there on
	// the host, leading to the root-only script.
	_, script := victim(t)
	p := workspace(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "ln", "-s", script, "run.json")
	wantCode(t, r, 0)
	target, _ := filepath.EvalSymlinks(filepath.Join(p, "run.json"))
	holeShown(t, target == script, "run.json on the host is a link to the root-only script", r)
	// Run N+1 writes its record there.
	r = aj(t, "run", "--write", p, "--chdir", p, "--record", filepath.Join(p, "run.json"), "--", "echo", payload)
	wantCode(t, r, 0)
	wantRecordNotVictim(t, filepath.Join(p, "run.json"), script, 0, 0)

	for _, c := range []struct {
		name string
		as   func(t *testing.T, dir string) invocation
		uid  int
	}{
		{"root", func(*testing.T, string) invocation { return invocation{} }, 0},
		{"started as uid 1000", asUser, runUID},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, script := victim(t)
			if c.uid != 0 { // a file in the user's home, outside the writable root
				os.Chown(dir, runUID, runUID)
				os.Chown(script, runUID, runUID)
			}
			p := workspace(t)
			rec := filepath.Join(p, "run.json")
			inv := c.as(t, p)

			// The same run plants the link.
			r := inv.run(t, "run", "--write", p, "--chdir", p, "--record", rec, "--", "sh", "-c", "ln -s "+script+" run.json; echo '"+payload+"'")
			wantCode(t, r, 0)
			wantRecordNotVictim(t, rec, script, c.uid, 0)

			// A file of the agent's own, world-writable, at the path.
			r = inv.run(t, "run", "--write", p, "--chdir", p, "--record", rec, "--", "sh", "-c", `rm -f run.json; echo '{"reason": "forged"}' > run.json; chmod 666 run.json`)
			wantCode(t, r, 0)
			got := readRecord(t, rec, 0)
			fi, _ := os.Lstat(rec)
			if got.Reason != "exit" || fi.Mode().Perm() != 0o600 || ownerOf(fi) != c.uid {
				t.Errorf("the agent's file survived as the record: reason %q, mode %v, owner %d", got.Reason, fi.Mode(), ownerOf(fi))
			}

			// A directory the agent made at the path during the run: the
			// record cannot be written, and the exit says so.
			r = inv.run(t, "run", "--write", p, "--chdir", p, "--record", rec, "--", "sh", "-c", "rm -f run.json; mkdir -p run.json/x")
			wantCode(t, r, 125)
			var said []string
			for _, line := range strings.Split(r.stderr, "\n") {
				if strings.Contains(line, "record") {
					said = append(said, line)
				}
			}
			if len(said) != 1 || !strings.HasPrefix(said[0], "agentjail: write the run record "+rec+": ") || !strings.HasSuffix(said[0], "the run ended with exit 0 (exit), but agentjail exits 125 without its record") {
				t.Errorf("a record not written is not one line on stderr:\n%s", r.stderr)
			}
		})
	}

	// A run that fails before the profile has loaded does not know the
	// writable roots: it follows no link at all.
	t.Run("setup failures", func(t *testing.T) {
		t.Parallel()
		vdir, script := victim(t)
		p := workspace(t)
		r := aj(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", "ln -s "+script+" run.json; ln -s "+vdir+" out")
		wantCode(t, r, 0)
		for _, mistake := range [][]string{{"--profile", "/nonexistent/agentjail.yaml"}, {"--timeout", "soon"}} {
			rec := filepath.Join(p, "run.json")
			r := aj(t, append(append([]string{"run", "--write", p, "--record", rec}, mistake...), "--", "true")...)
			wantCode(t, r, 125)
			wantRecordNotVictim(t, rec, script, 0, 125)
			os.Remove(rec)
			os.Symlink(script, rec)

			rec = filepath.Join(p, "out/run.json")
			r = aj(t, append(append([]string{"run", "--write", p, "--record", rec}, mistake...), "--", "true")...)
			wantCode(t, r, 125)
			if !strings.Contains(r.stderr, "--record "+rec+": a symbolic link on the path, which agentjail follows nowhere until the profile names the writable roots; give the path without links") {
				t.Errorf("%v: stderr:\n%s", mistake, r.stderr)
			}
			if got := entries(t, vdir); got != "victim.sh" {
				t.Errorf("%v: the root-only directory holds %q", mistake, got)
			}
		}
	})

	t.Run("a directory as --record", func(t *testing.T) {
		t.Parallel()
		p := workspace(t)
		for _, dir := range []string{"/tmp", p} {
			marker := filepath.Join(p, "ran")
			r := aj(t, "run", "--write", p, "--chdir", p, "--record", dir, "--", "touch", marker)
			refusedBeforeRun(t, r, marker, "agentjail: --record "+dir+": "+dir+" is a directory; name a file, such as "+filepath.Join(dir, "run.json")+"\n")
		}
	})
}

// wantRecordNotVictim checks that rec is a regular file holding the run
// record of a run that exited with code, owned by uid, and that the
// victim script is as it was.
func wantRecordNotVictim(t *testing.T, rec, script string, uid, code int) {
	t.Helper()
	if b, _ := os.ReadFile(script); string(b) != "echo harmless\n" {
		t.Errorf("the victim was replaced: %q", b)
	}
	fi, err := os.Lstat(rec)
	if err != nil || !fi.Mode().IsRegular() || ownerOf(fi) != uid {
		t.Fatalf("%s is not agentjail's regular file: %v %v", rec, fi, err)
	}
	readRecord(t, rec, code)
}

// TestEscapeOperatorOutputsLog: a link an earlier run left at --log's path
// made the next run append its output to any file. Now, in a writable
// root, an existing log must be a plain file of agentjail's user's own,
// else the run is refused before anything runs, naming the path and the
// fix; a fifo is refused without waiting.
func TestEscapeOperatorOutputsLog(t *testing.T) {
	jailed(t)
	_, script := victim(t)
	p := workspace(t)
	r := aj(t, "run", "--write", p, "--chdir", p, "--", "ln", "-s", script, "agent.log")
	wantCode(t, r, 0)
	log := filepath.Join(p, "agent.log")
	// The plain approach: a shell's >>.
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.WriteString("$(touch /tmp/pwned)\n")
		f.Close()
	}
	b, _ := os.ReadFile(script)
	holeShown(t, strings.Contains(string(b), "pwned"), "an append to agent.log reaches the root-only script", r)
	os.WriteFile(script, []byte("echo harmless\n"), 0o700)

	for _, c := range []struct {
		name, plant string
		as          func(t *testing.T, dir string) invocation
		want        string
	}{
		{"link, root", "ln -s " + script + " agent.log", nil, "a symbolic link in a writable root, which agentjail never follows (an agent may have planted it); remove the link, or choose a path outside the writable roots"},
		{"link, uid 1000", "ln -s " + script + " agent.log", asUser, "a symbolic link in a writable root"},
		{"fifo", "mkfifo agent.log", nil, "agent.log is a fifo: not a plain file of agentjail's own; remove it (agentjail creates the file itself), or choose another path"},
		{"the agent's own file, root", "echo planted > agent.log", nil, "agent.log is owned by uid 1000, not 0"},
		{"hard link, uid 1000", "echo x > f; ln f agent.log", asUser, "agent.log has 2 hard links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv := invocation{}
			p := workspace(t)
			if c.as != nil {
				inv = c.as(t, p)
			}
			r := inv.run(t, "run", "--write", p, "--chdir", p, "--", "sh", "-c", c.plant) // run N
			wantCode(t, r, 0)
			marker, log := filepath.Join(p, "ran"), filepath.Join(p, "agent.log")
			r = inv.run(t, "run", "--write", p, "--chdir", p, "--log", log, "--", "touch", marker) // run N+1
			refusedBeforeRun(t, r, marker, "--log "+log+": ", c.want)
			if b, _ := os.ReadFile(script); string(b) != "echo harmless\n" {
				t.Errorf("the victim changed: %q", b)
			}
		})
	}

	t.Run("agentjail's own log is appended to", func(t *testing.T) {
		t.Parallel()
		p := workspace(t)
		log := filepath.Join(p, "agent.log")
		for _, word := range []string{"one", "two"} {
			wantCode(t, aj(t, "run", "--write", p, "--chdir", p, "--log", log, "--", "echo", word), 0)
		}
		if b, _ := os.ReadFile(log); string(b) != "one\ntwo\n" {
			t.Errorf("the log holds %q", b)
		}
	})
}

// transcript is a shell line that leaves a Claude Code transcript in the
// run's private Claude directory.
func transcript(rel, content string) string {
	p := `"$CLAUDE_CONFIG_DIR"/projects/-w/` + rel
	return fmt.Sprintf("mkdir -p $(dirname %s) && echo '%s' > %s; ", p, content, p)
}

// TestEscapeOperatorOutputsResults: --results in a writable root. The
// agent swapped the directory for a link to a root-only one, and
// agentjail made root-owned files there with the agent's content; a later
// run replaced an earlier run's transcript; the agent chose how many
// transcripts and how large. Now the directory is held from before the
// run (what the agent does to its path cannot redirect it), a link there
// at the start is refused, nothing is overwritten (a taken name gets a new
// one, which the record lists) and a run copies at most 1000 files and
// 1 GiB.
func TestEscapeOperatorOutputsResults(t *testing.T) {
	jailed(t)

	t.Run("swapped for a link during the run", func(t *testing.T) {
		t.Parallel()
		vdir, _ := victim(t)
		p := workspace(t)
		write(t, p, map[string]string{"results/": ""})
		results, rp := filepath.Join(p, "results"), recordPath(t)
		r := aj(t, "run", "--write", p, "--chdir", p, "--results", results, "--record", rp, "--", "sh", "-c",
			transcript("s1.jsonl", "agent")+transcript("s1/subagents/a.jsonl", "sub")+"mv results results.aside && ln -s "+vdir+" results")
		wantCode(t, r, 0)
		// The plain approach: write through the path.
		os.WriteFile(filepath.Join(results, "probe.jsonl"), []byte("x"), 0o600)
		holeShown(t, fileExists(filepath.Join(vdir, "probe.jsonl")), "a write to results/ lands in the root-only directory", r)
		os.Remove(filepath.Join(vdir, "probe.jsonl"))

		if got := entries(t, vdir); got != "victim.sh" {
			t.Errorf("the root-only directory holds %q", got)
		}
		aside := filepath.Join(p, "results.aside")
		if b, _ := os.ReadFile(filepath.Join(aside, "s1.jsonl")); string(b) != "agent\n" {
			t.Errorf("the transcript is not in the directory held: %q", b)
		}
		rec := readRecord(t, rp, 0)
		if rec.Claude == nil || strings.Join(rec.Claude.Transcripts, " ") != filepath.Join(aside, "s1.jsonl")+" "+filepath.Join(aside, "s1/subagents/a.jsonl") {
			t.Errorf("the record lists %v", rec.Claude)
		}
		if !strings.Contains(strings.Join(rec.Warnings, "\n"), "--results: "+results+" was moved during the run, to "+aside) {
			t.Errorf("warnings: %q", rec.Warnings)
		}
	})

	t.Run("a link planted by an earlier run", func(t *testing.T) {
		t.Parallel()
		vdir, _ := victim(t)
		p := workspace(t)
		wantCode(t, aj(t, "run", "--write", p, "--chdir", p, "--", "ln", "-s", vdir, "results"), 0)
		marker, results := filepath.Join(p, "ran"), filepath.Join(p, "results")
		r := aj(t, "run", "--write", p, "--chdir", p, "--results", results, "--", "touch", marker)
		refusedBeforeRun(t, r, marker, "--results "+results+": "+results+": a symbolic link in a writable root", "remove the link")
		if got := entries(t, vdir); got != "victim.sh" {
			t.Errorf("the root-only directory holds %q", got)
		}
	})

	t.Run("an earlier transcript is never overwritten", func(t *testing.T) {
		t.Parallel()
		results, rp := visibleDir(t), recordPath(t)
		os.WriteFile(filepath.Join(results, "s1.jsonl"), []byte("earlier run\n"), 0o600)
		r := aj(t, "run", "--results", results, "--record", rp, "--", "sh", "-c", transcript("s1.jsonl", "forged"))
		wantCode(t, r, 0)
		if b, _ := os.ReadFile(filepath.Join(results, "s1.jsonl")); string(b) != "earlier run\n" {
			t.Errorf("the earlier transcript was replaced: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(results, "s1.1.jsonl")); string(b) != "forged\n" {
			t.Errorf("s1.1.jsonl: %q", b)
		}
		if rec := readRecord(t, rp, 0); rec.Claude == nil || strings.Join(rec.Claude.Transcripts, " ") != filepath.Join(results, "s1.1.jsonl") {
			t.Errorf("the record lists %v, want the name written", rec.Claude)
		}
	})

	t.Run("caps", func(t *testing.T) {
		t.Parallel()
		results, rp := visibleDir(t), recordPath(t)
		// 1001 small transcripts, and one of 1.5 GiB (sparse: it costs
		// the jail nothing) that would pass the byte cap alone.
		r := aj(t, "run", "--results", results, "--record", rp, "--", "sh", "-c",
			`d="$CLAUDE_CONFIG_DIR"/projects/-w && mkdir -p $d && cd $d && truncate -s 1536M a-big.jsonl && i=0 && while [ $i -lt 1001 ]; do echo '{}' > s$i.jsonl; i=$((i+1)); done`)
		wantCode(t, r, 0)
		copied, _ := filepath.Glob(filepath.Join(results, "*.jsonl"))
		var total int64
		for _, c := range copied {
			fi, _ := os.Stat(c)
			total += fi.Size()
		}
		if len(copied) != 1000 || total > 1<<30 || fileExists(filepath.Join(results, "a-big.jsonl")) {
			t.Errorf("%d files, %d bytes copied; want 1000 files, not a-big.jsonl", len(copied), total)
		}
		rec := readRecord(t, rp, 0)
		warnings := strings.Join(rec.Warnings, "\n")
		for _, w := range []string{"a-big.jsonl is 1610612736 bytes, more than the 1073741824 agentjail copies", "1 transcripts not copied: a run copies at most 1000"} {
			if !strings.Contains(warnings, w) {
				t.Errorf("the warnings lack %q:\n%s", w, warnings)
			}
		}
		if rec.Claude == nil || len(rec.Claude.Transcripts) != 1000 {
			t.Errorf("the record lists %d transcripts", len(rec.Claude.Transcripts))
		}
	})
}

// TestEscapeOperatorOutputsOtherRoots: the outputs trusted only this run's
// writable roots, so a link an earlier run left in its own root, which is
// not this run's, was followed: run A (--write p1) links p1/agent.log to a
// root-only script, run B (--write p2 --log p1/agent.log) appended to it.
// Now, outside the writable roots, a link is followed only when it is the
// operator's (root's or agentjail's user's, in a directory no one else may
// write, or a sticky one): --log, --record and --results through the
// agent's links are refused before anything runs, and the victim is
// untouched.
func TestEscapeOperatorOutputsOtherRoots(t *testing.T) {
	jailed(t)
	vdir, script := victim(t)
	p1 := workspace(t)
	r := aj(t, "run", "--write", p1, "--chdir", p1, "--", "sh", "-c", "ln -s "+script+" agent.log; ln -s "+script+" run.json; ln -s "+vdir+" results; ln -s "+vdir+" out")
	wantCode(t, r, 0)
	// The plain approach, a shell's >>, appends to the script.
	if f, err := os.OpenFile(filepath.Join(p1, "agent.log"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		f.WriteString("$(touch /tmp/pwned)\n")
		f.Close()
	}
	b, _ := os.ReadFile(script)
	holeShown(t, strings.Contains(string(b), "pwned"), "an append to p1/agent.log reaches the root-only script", r)
	os.WriteFile(script, []byte("echo harmless\n"), 0o700)

	for _, c := range []struct{ flag, path string }{
		{"--log", filepath.Join(p1, "agent.log")},
		{"--record", filepath.Join(p1, "run.json")},
		{"--record", filepath.Join(p1, "out/run.json")},
		{"--results", filepath.Join(p1, "results")},
		{"--results", filepath.Join(p1, "out/transcripts")},
	} {
		t.Run(c.flag+" "+filepath.Base(c.path), func(t *testing.T) {
			t.Parallel()
			p2 := workspace(t)
			marker := filepath.Join(p2, "ran")
			r := aj(t, "run", "--write", p2, "--chdir", p2, c.flag, c.path, "--", "touch", marker)
			refusedBeforeRun(t, r, marker, "agentjail: "+c.flag+" "+c.path+": ", "a symbolic link another user could have made or replaced, which agentjail does not follow; give the path without the link, or remove the link")
		})
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(script); string(b) != "echo harmless\n" {
			t.Errorf("the victim changed: %q", b)
		}
		if got := entries(t, vdir); got != "victim.sh" {
			t.Errorf("the root-only directory holds %q", got)
		}
	})
}

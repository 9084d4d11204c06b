package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/supervise"
)

// stage makes what the plan binds from the host and agentjail provides:
// the masks' empty file, and the run's staging directory with the private
// Claude Code directory and the copied credentials, owned by the run user
// (nil when the plan needs none; the caller removes it).
func (j *jail) stage() (*supervise.Staged, error) {
	if len(j.plan.Masks) > 0 {
		if err := supervise.EmptyFile(emptyFile()); err != nil {
			return nil, err
		}
	}
	if len(j.plan.Dirs) == 0 && len(j.plan.Copies) == 0 {
		return nil, nil
	}
	copies := make([]supervise.FileCopy, len(j.plan.Copies))
	for i, c := range j.plan.Copies {
		copies[i] = supervise.FileCopy{Src: c.Src, Dst: c.Dst}
	}
	dirs := make([]supervise.StageDir, len(j.plan.Dirs))
	for i, d := range j.plan.Dirs {
		dirs[i] = supervise.StageDir{Path: d.Path, Size: d.Size}
	}
	st, err := supervise.Stage(stageDir(j.runID), dirs, copies, j.user.UID, j.user.GID)
	if err != nil {
		st.Remove()
		return nil, fmt.Errorf("prepare the run's files: %w", err)
	}
	return st, nil
}

// claudeAfter completes the record's `claude` object once the run has
// ended: what claude's json output said (parser, nil for other commands),
// what became of the copied-in login, and the transcripts copied to
// results. It is set when the command is claude, or when the run's private
// Claude Code directory held a login or transcripts. Problems are warnings:
// the run itself is over.
func claudeAfter(j *jail, st *supervise.Staged, parser *claude.Parser, results *hostfs.Dir, rec *supervise.Record, secrets []string) {
	var sum claude.Summary
	if parser != nil {
		sum = parser.Summary()
		if sum.Result != nil {
			// The excerpt may cut a secret at its end.
			r, _ := supervise.RedactExcerpt(*sum.Result, "", int64(sum.ResultBytes-len(*sum.Result)), secrets)
			sum.Result = &r
		}
	}
	warn := func(format string, a ...any) { rec.Warnings = append(rec.Warnings, fmt.Sprintf(format, a...)) }
	home := j.plan.Claude
	if home != nil && st != nil && home.Credentials != "" {
		sum.Credentials = writeBack(home, st, j.user.UID)
		if !sum.Credentials.WrittenBack && sum.Credentials.Refreshed && home.WriteBack {
			warn("claude refreshed the login, which was not written back to %s: %s", home.Credentials, sum.Credentials.Detail)
		}
	}
	sum.Transcripts = []string{}
	switch {
	case results == nil:
	case home == nil || st == nil:
		warn("--results: the profile gives claude no private directory (claude.home), so there are no transcripts to copy")
	default:
		copied, skipped := supervise.CopyTranscripts(home.Dir, results, j.user.UID, supervise.MaxTranscripts, supervise.MaxTranscriptBytes)
		sum.Transcripts = append(sum.Transcripts, copied...)
		for _, s := range skipped {
			warn("--results: %s", s)
		}
		if now := results.Where(); now != results.Path {
			warn("--results: %s was moved during the run, to %s; the transcripts are there", results.Path, now)
		}
	}
	if parser != nil || sum.Credentials != nil || len(sum.Transcripts) > 0 {
		rec.Claude = &sum
	}
}

// writeBack writes the credentials file claude left in the run's directory
// back to its source when claude refreshed the login (claude.WriteBack
// decides) and the profile allows it.
func writeBack(home *mounts.ClaudeHome, st *supervise.Staged, uid int) *claude.Credentials {
	c := &claude.Credentials{Source: home.Credentials, WriteBack: home.WriteBack}
	copied := st.Copied[filepath.Join(home.Dir, mounts.ClaudeCredentials)]
	now, err := supervise.ReadOwned(home.Dir, mounts.ClaudeCredentials, uid, claude.MaxCredentials)
	if err != nil {
		c.Detail = "the run's credentials file cannot be read back: " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			c.Detail = "claude removed its credentials file (a logout); the source was kept"
		}
		return c
	}
	source, err := os.ReadFile(home.Credentials)
	if err != nil {
		source = nil
	}
	var write bool
	c.Refreshed, write, c.Detail = claude.WriteBack(copied, now, source)
	switch {
	case !write:
	case !home.WriteBack:
		c.Detail = "claude refreshed the login; not written back (claude.write_back: false)"
	default:
		if err := supervise.WriteAtomic(home.Credentials, now); err != nil {
			c.Detail = "claude refreshed the login; writing it back failed: " + err.Error()
			return c
		}
		c.WrittenBack = true
	}
	return c
}

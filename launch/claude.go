package launch

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentjail/agentjail/claude"
	"github.com/agentjail/agentjail/hostfs"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
)

// makeAgentHomes makes what the plan binds from the host and agentjail provides:
// the masks' sources, and the run's agent-homes directory with the agents'
// private directories and the copied credentials, owned by the run user
// (nil when the plan needs none; the caller removes it). Of the operator's
// agent logins and configuration (filtered) it copies only what login,
// config, settings and codexLogin kept; nothing when they have not run or
// kept nothing.
func (j *Jail) makeAgentHomes() (*hostfs.AgentHomes, error) {
	if len(j.Plan.Masks) > 0 {
		if err := hostfs.EmptyFile(EmptyFile()); err != nil {
			return nil, err
		}
		if err := hostfs.CommonDirFile(CommonDirFile()); err != nil {
			return nil, err
		}
		if err := hostfs.GitFile(GitFile(), runstate.RunDir()); err != nil {
			return nil, err
		}
	}
	if len(j.Plan.Dirs) == 0 && len(j.Plan.Copies) == 0 && len(j.Plan.GitIgnore) == 0 {
		return nil, nil
	}
	var copies []hostfs.FileCopy
	if len(j.Plan.GitIgnore) > 0 {
		copies = append(copies, hostfs.FileCopy{Src: "agentjail's git ignore list of its placeholders", Dst: GitIgnoreFile(j.RunID),
			Data: []byte(strings.Join(j.Plan.GitIgnore, "\n") + "\n")})
	}
	for _, c := range j.Plan.Copies {
		fc := hostfs.FileCopy{Src: c.Src, Dst: c.Dst, From: j.walker()}
		if j.filtered(c) {
			if fc.Data = j.files[c.Dst]; fc.Data == nil {
				continue
			}
		}
		copies = append(copies, fc)
	}
	if cfg := j.codexConfig(); cfg != nil {
		copies = append(copies, hostfs.FileCopy{Src: "agentjail's Codex configuration for a proxy jail", Dst: filepath.Join(j.Plan.Codex.Dir, "config.toml"), Data: cfg})
	}
	dirs := make([]hostfs.AgentHomeDir, len(j.Plan.Dirs))
	for i, d := range j.Plan.Dirs {
		dirs[i] = hostfs.AgentHomeDir{Path: d.Path, Size: d.Size}
	}
	st, err := hostfs.MakeAgentHomes(AgentHomesDir(j.RunID), dirs, copies, j.User.UID, j.User.GID)
	if err != nil {
		st.Remove()
		if errors.Is(err, hostfs.ErrTooLarge) {
			err = fmt.Errorf("%w; make it smaller, or leave it out: claude: {settings: false} for ~/.claude's commands, agents and skills, filesystem.credentials for the rest", err)
		}
		return nil, fmt.Errorf("prepare the run's files: %w", err)
	}
	return st, nil
}

// filtered reports whether c copies a file of the operator's of which a
// run gets only part, made before the run (j.files): the Claude Code login
// (login), ~/.claude.json (config), settings.json (settings), Codex's
// auth.json (codexLogin). Such a file is never copied as it is.
func (j *Jail) filtered(c mounts.Copy) bool {
	var dsts []string
	if h := j.Plan.Claude; h != nil {
		dsts = append(dsts, filepath.Join(h.Dir, mounts.ClaudeCredentials), filepath.Join(h.Dir, mounts.ClaudeConfig))
	}
	if h := j.Plan.Codex; h != nil {
		dsts = append(dsts, filepath.Join(h.Dir, mounts.CodexAuth))
	}
	return slices.Contains(dsts, c.Dst) || path.Base(c.Dst) == mounts.ClaudeSettings && j.Plan.Claude != nil && c.Src == j.Plan.Claude.Settings
}

// PartOf says what the run gets of a copy's source, named src (render
// prints it).
func (j *Jail) PartOf(c mounts.Copy, src string) string {
	if !j.filtered(c) {
		return "a copy of " + src
	}
	switch path.Base(c.Dst) {
	case mounts.ClaudeCredentials:
		return "the login of " + src + " without its refresh token (only claudeAiOauth's accessToken, expiresAt, scopes, subscriptionType, rateLimitTier)"
	case mounts.ClaudeConfig:
		return "the onboarding and trust state of " + src + " (none of its keys, tokens or history: see docs/claude.md)"
	case mounts.ClaudeSettings:
		return "the settings of " + src + " that run nothing and hold no credential (no hooks, statusLine, env, apiKeyHelper…: see docs/claude.md)"
	}
	return "the API key of " + src + ", or its login without the refresh token (see docs/codex.md)"
}

// keep records what the run gets of the operator's file copied to dst
// (nil: nothing).
func (j *Jail) keep(dst string, data []byte) {
	if j.files == nil {
		j.files = map[string][]byte{}
	}
	j.files[dst] = data
}

// walker reaches what agentjail reads or writes for the operator: no link
// in the run's writable roots is followed (hostfs).
func (j *Jail) walker() hostfs.Walker {
	return hostfs.Walker{Roots: mounts.WritableRoots(j.Policy)}
}

// config reads the operator's ~/.claude.json that the plan copies into the
// run's private directory and keeps what the run gets of it
// (claude.ConfigForRun: the onboarding and trust state, no secrets). One
// that cannot be read or is not claude's is left out, with a warning.
func (j *Jail) config() (warning string) {
	h := j.Plan.Claude
	for _, c := range j.Plan.Copies {
		if h == nil || c.Dst != filepath.Join(h.Dir, mounts.ClaudeConfig) {
			continue
		}
		data, err := readClaudeFile(j.walker(), c.Src, claude.MaxConfig)
		if err == nil {
			j.configKey(data) // before: the placeholder stands for the key
			data, err = claude.ConfigForRun(data, claude.APIKeyEnd(j.realEnv()))
			if err == nil {
				data = j.approvePlaceholder(data)
			}
		}
		if err == nil {
			j.configKey(data)
		}
		if err != nil {
			return fmt.Sprintf("%s %v: not copied in (claude starts without its onboarding and trust state)", c.Src, err)
		}
		j.keep(c.Dst, data)
	}
	return ""
}

// settings reads the operator's ~/.claude/settings.json that the plan
// carries into the run, read-only, and keeps what the run gets of it
// (claude.SettingsForRun: no key that runs a command, holds or makes a
// credential, or sends data out). It returns a warning naming the keys
// left out, or saying why none was carried.
func (j *Jail) settings() (warning string) {
	h := j.Plan.Claude
	if h == nil || h.Settings == "" {
		return ""
	}
	for _, c := range j.Plan.Copies {
		if c.Src != h.Settings {
			continue
		}
		data, err := readClaudeFile(j.walker(), c.Src, claude.MaxSettings)
		var s claude.Settings
		if err == nil {
			s, err = claude.SettingsForRun(data)
		}
		if err != nil {
			// The plan binds the copied file read-only: an empty one takes
			// its place, so that bubblewrap finds its source and the agent
			// still cannot plant settings there.
			j.keep(c.Dst, []byte("{}\n"))
			return fmt.Sprintf("%s %v: not carried in (claude runs without the operator's settings)", c.Src, err)
		}
		j.keep(c.Dst, s.File)
		if len(s.Dropped) > 0 {
			return fmt.Sprintf("%s: carried in without %s (they run commands, hold or make credentials, send data out, or are unknown to agentjail)", c.Src, strings.Join(s.Dropped, ", "))
		}
	}
	return ""
}

// claudeAfter completes the record's `claude` object once the run has
// ended: what claude's json output said (parser, nil for other commands),
// what the run got of the operator's login, and the transcripts copied to
// results. It is set when the command is claude, or when the operator had
// a login for the run's private Claude Code directory, or it held
// transcripts. Problems are warnings: the run itself is over.
func claudeAfter(j *Jail, sess *session, parser *claude.Parser, results *hostfs.Dir, rec *record.Record, secrets, hidden []string) {
	var sum record.Claude
	if parser != nil {
		sum = parser.Summary()
		if sum.Result != nil {
			// The excerpt may cut a secret at its end.
			r, _, _ := record.RedactExcerpt(*sum.Result, "", int64(sum.ResultBytes-len(*sum.Result)), secrets, hidden)
			sum.Result = &r
		}
	}
	warn := func(format string, a ...any) { rec.Warnings = append(rec.Warnings, fmt.Sprintf(format, a...)) }
	home := j.Plan.Claude
	sum.Credentials = j.credentials
	sum.Transcripts = []string{}
	switch {
	case results == nil:
	case home == nil || sess.claudeDir == nil:
		warn("--results: the profile gives claude no private directory (claude.home), so there are no transcripts to copy")
	default:
		var since time.Time // claude.dir holds earlier runs' sessions: only this run's are copied
		if sess.sessions != nil {
			since = time.Time(rec.StartedAt)
		}
		copied, skipped := hostfs.CopyTranscripts(sess.claudePath(), results, j.User.UID, hostfs.MaxTranscripts, hostfs.MaxTranscriptBytes, since)
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

// login reads the operator's Claude Code login that the plan copies into
// the run's private directory, and keeps what the run gets of it
// (claude.LoginForRun: the access token alone) and the record's report.
// Nothing the run does to its copy ever goes back: the operator's file is
// only read, here, before the run.
//
// When the command is claude and nothing in the jail's environment gives
// it a login of its own (claude.EnvLogin), a login that has expired is an
// error (exit 125 before anything runs): claude could only fail, and the
// jail gets no refresh token to renew it. Otherwise a login that cannot
// be used is left out with a warning, and one that expires before the
// wall limit is copied with a warning (the run may end before).
func (j *Jail) login(now time.Time) (warning string, err error) {
	home := j.Plan.Claude
	if home == nil || home.Credentials == "" {
		return "", nil
	}
	src := home.Credentials
	c := &record.ClaudeLogin{Source: src}
	j.credentials = c
	if j.Policy.NetMode() == policy.NetNone {
		c.Detail = noNetworkLogin
		return "", nil
	}
	var wall time.Duration
	if w := j.Policy.Limits.Wall; w != nil {
		wall = time.Duration(*w)
	}
	var l claude.Login
	data, err := readClaudeFile(j.walker(), src, claude.MaxCredentials)
	if err == nil {
		l, err = claude.LoginForRun(data, now, wall)
	}
	other := claude.EnvLogin(j.Env)
	if err == nil {
		c.Copied = true
		j.keep(filepath.Join(home.Dir, mounts.ClaudeCredentials), l.File)
		j.secrets = append(j.secrets, l.Secrets...)
		c.Detail = "copied in: the access token alone, without the refresh token"
		if !l.Expires.IsZero() {
			at := l.Expires.Format(record.TimeLayout)
			c.ExpiresAt = &at
		}
		if l.Warning == "" || other != "" {
			return "", nil
		}
		return fmt.Sprintf("the Claude Code login in %s: %s; renew it before (run claude on the host), or give the run CLAUDE_CODE_OAUTH_TOKEN", src, l.Warning), nil
	}
	c.Detail = fmt.Sprintf("%s %v: not copied in", src, err)
	switch {
	case other != "":
		c.Detail += "; the run has " + other
		return "", nil
	case errors.Is(err, claude.ErrLoginExpired) && claude.Command(j.Argv) != "":
		return "", fmt.Errorf("%s %v (the jail gets no refresh token); run claude on the host to renew it, or give the run CLAUDE_CODE_OAUTH_TOKEN (claude setup-token) or ANTHROPIC_API_KEY", src, err)
	}
	return c.Detail, nil
}

// readClaudeFile reads a file of the operator's Claude Code (its
// credentials, its ~/.claude.json) through w (hostfs: no link an agent
// could have planted in a writable root is followed): a regular file (a
// FIFO would block the start; a device would never end) of at most max
// bytes, checked before it is opened for reading (hostfs.OpenAt).
func readClaudeFile(w hostfs.Walker, path string, max int64) ([]byte, error) {
	var wrong error
	f, _, err := w.Open(path, func(st *unix.Stat_t) error {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			wrong = errors.New("is not a regular file")
		case st.Size > max:
			wrong = fmt.Errorf("is %d bytes, more than the %d agentjail reads", st.Size, max)
		}
		return wrong
	})
	if wrong != nil {
		return nil, wrong
	}
	if err != nil {
		return nil, fmt.Errorf("cannot be read (%w)", err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

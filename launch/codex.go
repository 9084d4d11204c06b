package launch

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentjail/agentjail/codex"
	"github.com/agentjail/agentjail/mounts"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
)

// codexLogin reads the operator's ~/.codex/auth.json that the plan copies
// into the run's private Codex directory, and keeps what the run gets of
// it (codex.AuthForRun: an API key, or a ChatGPT login's access token
// without its refresh token) and the record's report. Nothing the run
// does to its copy goes back: the operator's file is only read, here,
// before the run. The rules for a login that cannot be used are claude's
// (login): an expired one stops `codex` unless the jail's environment
// gives it a login of its own; anything else is a warning.
func (j *Jail) codexLogin(now time.Time) (warning string, err error) {
	home := j.Plan.Codex
	if home == nil || home.Auth == "" {
		return "", nil
	}
	src := home.Auth
	c := &record.Login{Source: src}
	j.codexCredentials = c
	if j.Policy.NetMode() == policy.NetNone {
		c.Detail = noNetworkLogin
		return "", nil
	}
	var wall time.Duration
	if w := j.Policy.Limits.Wall; w != nil {
		wall = time.Duration(*w)
	}
	var l codex.Login
	data, err := readClaudeFile(j.walker(), src, codex.MaxAuth)
	if err == nil {
		l, err = codex.AuthForRun(data, now, wall)
	}
	other := codex.EnvLogin(j.Env)
	if err == nil {
		c.Copied = true
		j.keep(filepath.Join(home.Dir, mounts.CodexAuth), l.File)
		j.secrets = append(j.secrets, l.Secrets...)
		c.Detail = "copied in: the " + l.Kind
		if l.Kind != "API key" {
			c.Detail += ", without the refresh token"
		}
		if !l.Expires.IsZero() {
			at := l.Expires.Format(record.TimeLayout)
			c.ExpiresAt = &at
		}
		if l.Warning == "" || other != "" {
			return "", nil
		}
		return fmt.Sprintf("the Codex login in %s: %s; renew it before (run codex on the host), or give the run OPENAI_API_KEY", src, l.Warning), nil
	}
	c.Detail = fmt.Sprintf("%s %v: not copied in", src, err)
	switch {
	case other != "":
		c.Detail += "; the run has " + other
		return "", nil
	case errors.Is(err, codex.ErrLoginExpired) && codex.Command(j.Argv) != "":
		return "", fmt.Errorf("%s %v (the jail gets no refresh token); run codex on the host to renew it, or give the run OPENAI_API_KEY", src, err)
	}
	return c.Detail, nil
}

// agentAfter sets the record's agent object once the run has ended, for a
// command that is an agent agentjail knows: claude's from its claude
// object (claudeAfter has set it), codex's from its parser.
func agentAfter(j *Jail, parser *codex.Parser, rec *record.Record, secrets, hidden []string) {
	switch {
	case rec.Claude != nil && rec.Claude.OutputFormat != "":
		rec.Agent = record.AgentOf(rec.Claude)
	case parser != nil:
		a := parser.Summary()
		if a.Result != nil {
			r, _, _ := record.RedactExcerpt(*a.Result, "", int64(a.ResultBytes-len(*a.Result)), secrets, hidden)
			a.Result = &r
		}
		if a.Error != nil {
			e, _, _ := record.RedactExcerpt(*a.Error, "", 0, secrets, hidden)
			a.Error = &e
		}
		a.Credentials = j.codexCredentials
		rec.Agent = &a
	}
}

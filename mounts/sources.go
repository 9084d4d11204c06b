package mounts

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentjail/agentjail/policy"
)

// copySources are the operator's files a plan may give the jail from the
// operator's homes (credentials, Claude Code's login and configuration):
// each, under each home. Where a home lies in a writable root, the agent of
// one run could edit or replace them for the next one's copy, or for the
// operator's own tools (an ~/.aws/config whose credential_process runs a
// command, a ~/.claude.json or a login of the agent's): protect keeps them
// read-only, or uncreatable, there.
func (r *renderer) copySources() []string {
	var subs []string
	for _, c := range r.p.Filesystem.Credentials {
		subs = append(subs, policy.ExpandPath(c, []string{"/"}, "")[0])
	}
	if c := r.p.Claude; policy.On(c.Home) && r.in.ClaudeDir != "" {
		if policy.On(c.Credentials) {
			subs = append(subs, path.Join(".claude", ClaudeCredentials), ClaudeConfig)
		}
		if policy.On(c.Settings) {
			for _, name := range ClaudeCarried {
				subs = append(subs, path.Join(".claude", name))
			}
		}
	}
	if c := r.p.Codex; policy.On(c.Home) && policy.On(c.Credentials) && r.in.CodexDir != "" {
		subs = append(subs, path.Join(".codex", CodexAuth))
	}
	var out []string
	for _, h := range r.in.OperatorHomes {
		for _, s := range subs {
			out = append(out, path.Join(h, s))
		}
	}
	return out
}

// plantedLink returns the symbolic link in a writable root that the copy
// source src is or passes through, "" for none: an agent may have planted
// it to have agentjail, often root, copy what it points to into the jail
// (/etc/shadow as ~/.claude.json). Such a source is not given to the jail,
// with a warning.
func (r *renderer) plantedLink(src string, roots []string) string {
	_, link, err := follow(r.in.Disk, src, roots)
	if err != nil || link == "" {
		return ""
	}
	t, _ := r.in.Disk.ReadLink(rel(link))
	r.plan.Warnings = append(r.plan.Warnings, fmt.Sprintf("%s is not given to the jail: %s is a symbolic link (to %s) in a writable root, which an agent may have planted; replace it by what it points to",
		src, link, t))
	return link
}

// inputs returns the input files (Input.Inputs) that lie in a writable
// root, where the agent of this run could edit what the next run loads (a
// profile, one it extends, a seccomp file), for protect to keep read-only,
// and warns about them once.
func (r *renderer) inputs(roots []string) []string {
	var in []string
	for _, p := range r.in.Inputs {
		if t, err := resolve(r.in.Disk, p); err == nil && underAny(t, roots) && !slices.Contains(in, p) {
			in = append(in, p)
		}
	}
	if len(in) > 0 {
		r.plan.Warnings = append(r.plan.Warnings, fmt.Sprintf("%s: in a writable root, kept read-only for this run so that the agent cannot edit what the next run loads; keep profiles and seccomp files outside the writable roots",
			strings.Join(in, ", ")))
	}
	return in
}

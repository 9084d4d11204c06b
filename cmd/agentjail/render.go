package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/supervise"
)

// renderAction prints the bwrap command line of a run: one shell-quoted
// line whose file-descriptor arguments are placeholders, a comment listing
// them, and the names (never the values) of the jail's environment.
func (e appEnv) renderAction(ctx context.Context, cmd *cli.Command) error {
	j, err := prepareWith(cmd, commandArgs(cmd, e.rawAfter(cmd.Name)), jailOptions{runID: "<run-id>"})
	if err != nil {
		return err
	}
	closeAll(j.seccomp) // render only shows where they would go
	for _, w := range j.plan.Warnings {
		fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", w)
	}
	for _, d := range j.plan.Degradations {
		fmt.Fprintf(e.stderr, "agentjail: degraded: %s\n", d)
	}
	names := make([]string, 0, len(j.env))
	for _, kv := range j.env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	if cmd.Bool("json") {
		fds := map[string]string{}
		for i, name := range j.plan.FDs {
			fds[strconv.Itoa(i+1)] = name
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(renderJSON{
			Argv: append([]string{j.bwrap.Path}, j.plan.Args...), FDs: fds, Env: names,
			User: supervise.User{UID: j.user.UID, GID: j.user.GID, Name: j.user.Name}, UserReason: j.userWhy,
			Profile: j.profile, Home: j.plan.Home, Masks: j.plan.Masks, Warnings: j.plan.Warnings,
			Degradations: j.plan.Degradations,
		})
	}
	words := []string{shellQuote(j.bwrap.Path)}
	var fds []string
	for i, a := range j.plan.Args {
		if name, ok := j.plan.FDs[i]; ok {
			a = "<fd:" + name + ">"
			fds = append(fds, j.plan.Args[i-1]+" "+shellQuote(a))
		}
		words = append(words, shellQuote(a))
	}
	fmt.Fprintln(e.stdout, strings.Join(words, " "))
	fmt.Fprintf(e.stdout, "# fds: %s: pipes agentjail run passes; remove each flag with its value to run this line by hand\n", strings.Join(fds, ", "))
	fmt.Fprintf(e.stdout, "# env: %s\n", strings.Join(names, " "))
	return nil
}

// renderJSON is `render --json`, a stable contract: fields are added,
// never renamed. argv[0] is bwrap; fds maps an argv index to the name of
// the pipe agentjail run passes there.
type renderJSON struct {
	Argv       []string          `json:"argv"`
	FDs        map[string]string `json:"fds"`
	Env        []string          `json:"env"`
	User       supervise.User    `json:"user"`
	UserReason string            `json:"user_reason"`
	Profile    string            `json:"profile"`
	Home       string            `json:"home"`
	Masks      []string          `json:"masks"`
	Warnings   []string          `json:"warnings"`
	// Degradations are promises this host makes the jail drop (allowed by
	// the profile); the run record carries the same list.
	Degradations []string `json:"degradations"`
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"
)

// renderAction prints the bwrap command line of a run: one shell-quoted
// line whose file-descriptor arguments are placeholders, a comment listing
// them, and the names (never the values) of the jail's environment.
func (e appEnv) renderAction(ctx context.Context, cmd *cli.Command) error {
	j, err := prepare(cmd, commandArgs(cmd, e.rawAfter(cmd.Name)))
	if err != nil {
		return err
	}
	for _, w := range j.plan.Warnings {
		fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", w)
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
	names := make([]string, 0, len(j.env))
	for _, kv := range j.env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	fmt.Fprintf(e.stdout, "# env: %s\n", strings.Join(names, " "))
	return nil
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

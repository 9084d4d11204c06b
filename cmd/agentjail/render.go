package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentjail/agentjail/launch"
	"github.com/agentjail/agentjail/policy"
	"github.com/agentjail/agentjail/record"
	"github.com/agentjail/agentjail/runstate"
	"github.com/urfave/cli/v3"
)

// renderAction prints the bwrap command line of a run: one shell-quoted
// line whose file-descriptor arguments are placeholders, a comment listing
// them, and the names (never the values) of the jail's environment.
func (e appEnv) renderAction(ctx context.Context, cmd *cli.Command) error {
	req, err := request(cmd, commandArgs(cmd, e.rawAfter(cmd.Name)))
	if err != nil {
		return err
	}
	j, err := launch.Prepare(req, launch.Options{RunID: "<run-id>", PlanOnly: true})
	if err != nil {
		return err
	}
	j.Release() // render only shows where they would go
	for _, w := range j.Warnings() {
		fmt.Fprintf(e.stderr, "agentjail: warning: %s\n", policy.Printable(w))
	}
	for _, d := range j.Plan.Degradations {
		fmt.Fprintf(e.stderr, "agentjail: degraded: %s\n", policy.Printable(d))
	}
	names := make([]string, 0, len(j.Env))
	for _, kv := range j.Env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	if cmd.Bool("json") {
		fds := map[string]string{}
		for i, name := range j.Plan.FDs {
			fds[strconv.Itoa(i+1)] = name
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(renderJSON{
			Argv: append([]string{j.Bwrap.Path}, j.Plan.Args...), FDs: fds, Env: names,
			User: record.User{UID: j.User.UID, GID: j.User.GID, Name: j.User.Name}, UserReason: j.User.Why,
			Profile: j.Profile, Home: j.Plan.Home, Masks: list(j.Plan.Masks), Warnings: list(j.Warnings()),
			Degradations: list(j.Plan.Degradations),
		})
	}
	words := []string{policy.ShellQuote(j.Bwrap.Path)}
	var fds []string
	for i, a := range j.Plan.Args {
		if name, ok := j.Plan.FDs[i]; ok {
			a = "<fd:" + name + ">"
			fds = append(fds, j.Plan.Args[i-1]+" "+policy.ShellQuote(a))
		}
		words = append(words, policy.ShellQuote(a))
	}
	fmt.Fprint(e.stdout, renderHeader(j))
	fmt.Fprintln(e.stdout, strings.Join(words, " "))
	without := "agentjail's supervision: limits, cgroup, post-run checks"
	if len(j.Seccomp) > 0 {
		without = "the seccomp filter and " + without
	}
	if j.Policy.NetMode() == policy.NetProxy {
		without += "; remove the --listen flags too: only agentjail run serves the broker, so the jail then has no way out"
	}
	fmt.Fprintf(e.stdout, "# fds: %s: pipes agentjail run passes; remove each flag with its value to run this line by hand; it then runs without %s\n",
		strings.Join(fds, ", "), without)
	fmt.Fprintf(e.stdout, "# env: %s\n", strings.Join(names, " "))
	return nil
}

// renderHeader is the comment that precedes the rendered line: as whom to
// run it, what `agentjail run` makes before it starts bwrap (the line
// names those paths, and bwrap fails without them), and the mask
// placeholders bwrap leaves on the host, which run removes afterwards.
func renderHeader(j *launch.Jail) string {
	var b strings.Builder
	who := fmt.Sprintf("uid %d gid %d", j.User.UID, j.User.GID)
	switch {
	case os.Getuid() != 0:
		fmt.Fprintf(&b, "# Run this line as yourself (%s), with the environment named in `# env:` below.\n", who)
	case j.User.UID == 0:
		fmt.Fprintf(&b, "# Run this line as root, with the environment named in `# env:` below.\n")
	default:
		groups := "--clear-groups"
		if len(j.User.Groups) > 0 {
			ids := make([]string, len(j.User.Groups))
			for i, g := range j.User.Groups {
				ids[i] = strconv.Itoa(g)
			}
			groups = "--groups=" + strings.Join(ids, ",")
		}
		fmt.Fprintf(&b, "# Run this line as the run user, %s (%s; %s), never as root: prefix it with\n#   setpriv --reuid=%d --regid=%d %s --\n# and give it the environment named in `# env:` below.\n",
			who, j.User.Name, j.User.Why, j.User.UID, j.User.GID, groups)
	}
	var made []string
	if len(j.Plan.Masks) > 0 {
		made = append(made, policy.ShellQuote(launch.EmptyFile())+": an empty file every user can read (mode 0444), the source of every mask")
		if slices.ContainsFunc(j.Plan.Masks, func(m string) bool { return strings.HasSuffix(m, "/commondir") }) {
			made = append(made, policy.ShellQuote(launch.CommonDirFile())+": a file holding \".\" and a newline, every user can read (mode 0444), the source of the masks over a missing commondir")
		}
		if slices.ContainsFunc(j.Plan.Masks, func(m string) bool { return strings.HasSuffix(m, "/.git") }) {
			made = append(made, policy.ShellQuote(launch.GitFile())+": a file holding \"gitdir: "+runstate.RunDir()+"\" and a newline, every user can read (mode 0444), the source of the masks over a missing .git")
		}
	}
	if len(j.Plan.Dirs) > 0 || len(j.Plan.Copies) > 0 || len(j.Plan.GitIgnore) > 0 {
		made = append(made, policy.ShellQuote(launch.AgentHomesDir(j.RunID))+": a directory the run user can traverse (mode 0711)")
	}
	if len(j.Plan.GitIgnore) > 0 {
		quoted := make([]string, 0, len(j.Plan.GitIgnore))
		for _, l := range j.Plan.GitIgnore[1:] { // the first is a comment
			quoted = append(quoted, policy.ShellQuote(l))
		}
		made = append(made, fmt.Sprintf("%s: a file owned by %s (in a directory of its, mode 0700) holding one per line the masks git is to ignore: %s",
			policy.ShellQuote(launch.GitIgnoreFile(j.RunID)), who, strings.Join(quoted, " ")))
	}
	for _, d := range j.Plan.Dirs {
		line := fmt.Sprintf("%s: a directory owned by %s, mode 0700", policy.ShellQuote(d.Path), who)
		if d.Size > 0 {
			line += fmt.Sprintf(" (run as root mounts a tmpfs of %d bytes there)", d.Size)
		}
		made = append(made, line)
	}
	if h := j.Plan.Claude; h != nil && h.Sessions != "" && strings.HasPrefix(h.Sessions, launch.AgentHomesDir(j.RunID)+"/") {
		made = append(made, fmt.Sprintf("%s: %s bound there (mount --bind, in a mount namespace of agentjail's own that bwrap inherits, so that the run user never reaches %s, mode 0700; its projects, made if missing, owned by %s)",
			policy.ShellQuote(h.Sessions), policy.ShellQuote(filepath.Join(j.Policy.Claude.Dir, "projects")), policy.ShellQuote(j.Policy.Claude.Dir), who))
	}
	for _, c := range j.Plan.Copies {
		what := j.PartOf(c, policy.ShellQuote(c.Src))
		made = append(made, fmt.Sprintf("%s: %s owned by %s (files 0600, directories 0700)", policy.ShellQuote(c.Dst), what, who))
	}
	if len(made) > 0 {
		b.WriteString("# agentjail run makes these before it starts bwrap (and removes the run's own directory after it); make them first (<run-id> stands for the run's fresh id: any unused name does):\n")
		for _, m := range made {
			b.WriteString("#   " + m + "\n")
		}
	}
	if len(j.Plan.Masks) > 0 {
		quoted := make([]string, len(j.Plan.Masks))
		for i, m := range j.Plan.Masks {
			quoted[i] = policy.ShellQuote(m)
		}
		b.WriteString("# bwrap makes each missing protected path it masks on the host (an empty file, or an empty directory under a tmpfs: its mount point); agentjail run removes them after the run, so remove them after running this line:\n")
		b.WriteString("#   " + strings.Join(quoted, " ") + "\n")
	}
	return b.String()
}

// renderJSON is `render --json`, a stable contract: fields are added,
// never renamed. argv[0] is bwrap; fds maps an argv index to the name of
// the pipe agentjail run passes there.
type renderJSON struct {
	Argv       []string          `json:"argv"`
	FDs        map[string]string `json:"fds"`
	Env        []string          `json:"env"`
	User       record.User       `json:"user"`
	UserReason string            `json:"user_reason"`
	Profile    string            `json:"profile"`
	Home       string            `json:"home"`
	Masks      []string          `json:"masks"`
	Warnings   []string          `json:"warnings"`
	// Degradations are promises this host makes the jail drop (allowed by
	// the profile); the run record carries the same list.
	Degradations []string `json:"degradations"`
}

// list is l, or an empty list for none: JSON's [] rather than null.
func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

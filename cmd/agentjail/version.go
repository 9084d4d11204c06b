package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/launch"
)

func init() {
	// agentjail --version: the first line of agentjail version.
	cli.VersionPrinter = func(cmd *cli.Command) { fmt.Fprintln(cmd.Root().Writer, versionLine()) }
}

func versionLine() string {
	return fmt.Sprintf("agentjail %s (%s, %s/%s)", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// versionJSON is `agentjail version --json`.
type versionJSON struct {
	Version string    `json:"version"`
	Go      string    `json:"go"`
	OS      string    `json:"os"`
	Arch    string    `json:"arch"`
	Bwrap   bwrapJSON `json:"bwrap"`
}

type bwrapJSON struct {
	Path    string `json:"path"`    // "" when none was found
	Version string `json:"version"` // "" when unknown
	Setuid  bool   `json:"setuid"`
	Error   string `json:"error,omitempty"` // why it cannot be used
}

func (e appEnv) versionAction(ctx context.Context, cmd *cli.Command) error {
	info, err := bwrap.Detect(launch.CacheDir())
	if cmd.Bool("json") {
		v := versionJSON{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			Bwrap: bwrapJSON{Path: info.Path, Setuid: info.Setuid}}
		if info.Path != "" {
			v.Bwrap.Version = info.Version.String()
		}
		if err != nil {
			v.Bwrap.Error = err.Error()
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintln(e.stdout, versionLine())
	switch {
	case err != nil && info.Path == "":
		fmt.Fprintf(e.stdout, "bubblewrap: unavailable: %v\n", err)
	case err != nil:
		fmt.Fprintf(e.stdout, "bubblewrap %s (%s): %v\n", info.Version, info.Path, err)
	default:
		fmt.Fprintf(e.stdout, "bubblewrap %s (%s%s)\n", info.Version, info.Path, map[bool]string{true: ", setuid"}[info.Setuid])
	}
	return nil
}

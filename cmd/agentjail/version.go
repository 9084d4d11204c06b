package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/bwrap"
	"github.com/agentjail/agentjail/launch"
)

func (e appEnv) versionAction(ctx context.Context, cmd *cli.Command) error {
	fmt.Fprintf(e.stdout, "agentjail %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	info, err := bwrap.Detect(launch.CacheDir())
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

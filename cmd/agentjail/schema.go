package main

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/agentjail/agentjail/policy"
)

func (e appEnv) schemaAction(ctx context.Context, cmd *cli.Command) error {
	_, err := e.stdout.Write(policy.SchemaJSON)
	return err
}

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"fmgr.dev/manager/compose"
)

func newStartCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Apply pending migrations and serve until SIGINT/SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// After the first signal, restore the default handling so that a
			// second one ends a shutdown that takes too long.
			context.AfterFunc(ctx, stop)
			return compose.Run(ctx, cfg, compose.Options{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), Version: version})
		},
	}
}

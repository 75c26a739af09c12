package main

import (
	"github.com/spf13/cobra"

	"fmgr.dev/internal/ocibuild"
)

// newImageBuildSpecCmd is `flyte-manager image build-spec`: an image
// build's Pod on the kubernetes executor (run by the executor, not by
// hand; see internal/ocibuild).
func newImageBuildSpecCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "build-spec --storage URL --inputs URI --out PREFIX --registry PREFIX [--insecure]",
		Short:              "Build an image build task's ImageSpec as an OCI image and push it (an image build's Pod)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := ocibuild.ParsePod(args)
			if err != nil {
				return err
			}
			cmd.SilenceUsage = true
			return p.Run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
}

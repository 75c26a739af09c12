package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fmgr.dev/executor/local/images"
)

// newImageCmd is `flyte-manager image`: the local executor's image store,
// where raw container tasks find their images (no registry is used).
func newImageCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Load and list the images raw container tasks run in (local executor)",
	}
	var as string
	load := &cobra.Command{
		Use:   "load PATH",
		Short: "Add the images of an OCI layout directory, an OCI archive or a docker-save tar to the store",
		Long: "Add the images at PATH to the image store (executor.local.containers.images): an OCI image layout\n" +
			"directory, an OCI archive (a tar of one) or the tar `docker save` writes. Each image is stored under\n" +
			"the name it carries (org.opencontainers.image.ref.name, or the docker tag), or under --name. A task's\n" +
			"image reference (busybox, docker.io/library/busybox:latest, ...) resolves to it. A running manager\n" +
			"sees loaded images at once.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openImages(g, cmd)
			if err != nil {
				return err
			}
			refs, err := s.Load(args[0], as)
			if err != nil {
				return err
			}
			for _, r := range refs {
				fmt.Fprintln(cmd.OutOrStdout(), "loaded", r)
			}
			return nil
		},
	}
	load.Flags().StringVar(&as, "name", "", "the `reference` to store the image under (PATH must hold one image)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the images in the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := openImages(g, cmd)
			if err != nil {
				return err
			}
			all, err := s.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tDIGEST\tCOMMAND")
			for _, im := range all {
				fmt.Fprintf(w, "%s\t%s\t%s\n", im.Ref, im.Digest, strings.Join(append(im.Config.Entrypoint, im.Config.Cmd...), " "))
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(load, list, newImageBuildSpecCmd())
	return cmd
}

func openImages(g *globalFlags, cmd *cobra.Command) (*images.Store, error) {
	cfg, err := g.loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return images.Open(cfg.Executor.Local.Containers.Images)
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"fmgr.dev/cache"
	"fmgr.dev/internal/db"
)

// newCacheCmd is `flyte-manager cache`: maintenance of the output cache.
func newCacheCmd(g *globalFlags) *cobra.Command {
	c := &cobra.Command{Use: "cache", Short: "Maintain the output cache of discoverable tasks", Args: cobra.NoArgs}
	c.AddCommand(newCachePurgeCmd(g))
	return c
}

func newCachePurgeCmd(g *globalFlags) *cobra.Command {
	var sc cache.Scope
	var taskName string
	var dryRun bool
	c := &cobra.Command{
		Use:   "purge --project P --domain D [--task NAME] [--dry-run]",
		Short: "Delete cached outputs of a project and domain (of one task with --task)",
		Long: "Delete the cache entries of a project and domain, or only those of one task (its full name, e.g. env.my_task),\n" +
			"so the next identical runs compute their outputs again. The outputs themselves stay in storage.\n" +
			"With --dry-run nothing is deleted: the entries that would be are printed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sc.Project == "" || sc.Domain == "" {
				return fmt.Errorf("--project and --domain are required")
			}
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			gdb, err := openDatabase(ctx, cfg, false)
			if err != nil {
				return err
			}
			defer db.Close(gdb)
			repo := cache.NewRepo(gdb, cache.Limits{})
			entries, err := repo.Purge(ctx, sc, taskName, dryRun)
			if err != nil {
				return fmt.Errorf("purging the cache (is the database migrated? `flyte-manager migrate`): %w", err)
			}
			out := cmd.OutOrStdout()
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			for _, e := range entries {
				fmt.Fprintf(out, "%s %s/%s task=%s key=%s outputs=%s\n", verb, e.Project, e.Domain, e.TaskName, e.CacheKey, e.OutputURI)
			}
			fmt.Fprintf(out, "%s %d cache entries of %s/%s\n", verb, len(entries), sc.Project, sc.Domain)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&sc.Org, "org", "", "org of the project (empty for a local manager)")
	f.StringVar(&sc.Project, "project", "", "project whose entries to delete (required)")
	f.StringVar(&sc.Domain, "domain", "", "domain whose entries to delete (required)")
	f.StringVar(&taskName, "task", "", "only the entries of this task (its full name, e.g. env.my_task)")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be deleted and delete nothing")
	return c
}

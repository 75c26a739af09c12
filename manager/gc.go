package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/retention"
	"fmgr.dev/internal/store"
	"fmgr.dev/manager/compose"
)

// newGCCmd is `flyte-manager gc`: collect what retention no longer keeps,
// and pin runs it must keep.
func newGCCmd(g *globalFlags) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Delete ended runs past their retention, with everything they own, and unreferenced inputs",
		Long: "Delete the ended runs older than their project/domain's retention (retention.default and retention.rules),\n" +
			"with their actions, attempts, events, inputs, outputs, reports, logs, attempt directories and the code bundles\n" +
			"nothing else uses; outputs a cache entry points at stay, and so do running and pinned runs. Then delete the\n" +
			"content-addressed inputs no run or trigger references that are older than retention.inputGrace.\n" +
			"A running manager does the same every retention.interval on the executor lease holder.\n" +
			"With --dry-run nothing is deleted: the runs, objects and bytes that would go are printed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withDatabase(cmd, false, func(ctx context.Context, cfg *config.Config, gdb *gorm.DB) error {
				if err := db.Check(ctx, gdb); err != nil {
					return fmt.Errorf("%w (is the database migrated? `flyte-manager migrate`)", err)
				}
				blobs, err := compose.OpenStorage(ctx, cfg)
				if err != nil {
					return err
				}
				defer blobs.Close()
				log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				rep, err := compose.NewCollector(cfg, store.New(gdb), blobs, log).Collect(ctx, dryRun)
				printReport(cmd.OutOrStdout(), rep, dryRun)
				return err
			})
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted and delete nothing")
	c.AddCommand(newGCPinCmd(g, true), newGCPinCmd(g, false), newGCPinsCmd(g))
	return c
}

func printReport(w io.Writer, rep retention.Report, dryRun bool) {
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	for _, k := range rep.Deleted {
		fmt.Fprintf(w, "%s run %s\n", verb, k)
	}
	if more := rep.Runs - int64(len(rep.Deleted)); more > 0 {
		fmt.Fprintf(w, "%s %d more runs, not listed\n", verb, more)
	}
	fmt.Fprintf(w, "%s %d runs (%d actions), %d objects (%d bytes, %d code bundles, %d input directories), %d attempt directories (%d bytes); kept %d objects cached outputs point at\n",
		verb, rep.Runs, rep.Actions, rep.Objects, rep.Bytes, rep.Bundles, rep.Inputs, rep.Dirs, rep.DirBytes, rep.Kept)
	if dryRun {
		fmt.Fprintln(w, "(a dry run counts neither the code bundles nor the inputs that deleting these runs would leave unreferenced)")
	}
}

// newGCPinCmd is `gc pin` (pin) or `gc unpin`.
func newGCPinCmd(g *globalFlags, pin bool) *cobra.Command {
	var k store.RunKey
	var reason string
	use, short := "pin RUN --project P --domain D", "Keep a run whatever its age, until it is unpinned"
	if !pin {
		use, short = "unpin RUN --project P --domain D", "Let retention collect a pinned run again"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k.RunName = args[0]
			if k.Project == "" || k.Domain == "" {
				return fmt.Errorf("--project and --domain are required")
			}
			return g.withDatabase(cmd, false, func(ctx context.Context, cfg *config.Config, gdb *gorm.DB) error {
				rows := store.New(gdb).Retention
				if pin {
					who, _ := os.Hostname()
					if err := rows.Pin(ctx, k, "flyte-manager gc pin on "+who, reason); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "pinned run %s\n", k)
					return nil
				}
				if err := rows.Unpin(ctx, k); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "unpinned run %s\n", k)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringVar(&k.Org, "org", "", "org of the run (empty for a local manager)")
	f.StringVar(&k.Project, "project", "", "project of the run (required)")
	f.StringVar(&k.Domain, "domain", "", "domain of the run (required)")
	if pin {
		f.StringVar(&reason, "reason", "", "why the run is kept (shown by `gc pins`)")
	}
	return c
}

func newGCPinsCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "pins",
		Short: "List the pinned runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withDatabase(cmd, false, func(ctx context.Context, cfg *config.Config, gdb *gorm.DB) error {
				pins, err := store.New(gdb).Retention.Pins(ctx)
				if err != nil {
					return err
				}
				for _, p := range pins {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\tpinned %s by %s\t%s\n", p.RunKey, p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), p.PinnedBy, p.Reason)
				}
				return nil
			})
		},
	}
}

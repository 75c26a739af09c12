package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/queues"
	"fmgr.dev/internal/store"
)

// newQueuesCmd is `flyte-manager queues`: the configured named queues with
// their limits and what the database counts on each now.
func newQueuesCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "queues",
		Short: "List the configured queues with their limits, depth and in-flight counts",
		Long: "List the named queues of the configuration (queues:) with their limits (0 or - means unlimited) and, from the\n" +
			"database, DEPTH (actions on the queue that have not ended: queued, waiting and running) and IN-FLIGHT (those\n" +
			"whose attempt started). Give it the same --config and --db as the manager.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			set := queues.New(cfg.Queues)
			out := cmd.OutOrStdout()
			if len(set.All()) == 0 {
				fmt.Fprintln(out, "no queues are configured (declare them under queues: in the configuration)")
				return nil
			}
			ctx := cmd.Context()
			gdb, err := openDatabase(ctx, cfg, false)
			if err != nil {
				return err
			}
			defer db.Close(gdb)
			st, err := set.Statuses(ctx, store.New(gdb).Actions)
			if err != nil {
				return fmt.Errorf("counting the queues' actions (is the database migrated? `flyte-manager migrate`): %w", err)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "QUEUE\tDEPTH\tIN-FLIGHT\tMAX-DEPTH\tMAX-ACTION-CONCURRENCY\tMAX-RUN-CONCURRENCY")
			for _, s := range st {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", s.Name, s.Depth, s.InFlight,
					limit(s.MaxDepth), limit(s.MaxActionConcurrency), limit(s.MaxRunConcurrency))
			}
			return w.Flush()
		},
	}
}

func limit(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

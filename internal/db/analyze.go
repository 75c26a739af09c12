package db

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Planner statistics on PostgreSQL. Until a table is analyzed, the planner
// guesses, and for the manager's hottest lookup (an action by run and name)
// it guesses a tie between the unique key and the indexes that match only
// the run, then may walk every action of the run for each lookup: one run
// of 10,000 children on a new database spent 5 ms on each of its lookups
// (0.04 ms once analyzed), and the manager crawled until autovacuum's
// first pass, up to a minute or more later. KeepStatistics analyzes the
// tables that grow with runs as soon as their rows changed by a good part
// since the last analysis, as autovacuum would, without waiting for it.

// statsTables are the tables whose row counts grow with runs and whose
// lookups the planner must get right.
var statsTables = []string{"actions", "action_attempts", "action_events", "change_log"}

// analyzeAfter is how many rows of a table must have changed since its last
// analysis, at least, before KeepStatistics analyzes it again, and
// analyzeShare the share of its live rows (autovacuum's defaults are 50 and
// 10 %, checked once a minute).
const (
	analyzeAfter = 500
	analyzeShare = 0.2
)

// KeepStatistics analyzes, every interval until ctx ends, the statistics
// tables whose rows changed since their last analysis by analyzeAfter and
// analyzeShare of their live rows. It does nothing on SQLite, whose query
// planner does not depend on gathered statistics for these lookups.
func KeepStatistics(ctx context.Context, g *gorm.DB, every time.Duration, log *slog.Logger) error {
	if Dialect(g) != Postgres {
		return nil
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := analyzeChanged(ctx, g); err != nil && ctx.Err() == nil {
			log.Warn("could not refresh the planner's statistics", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// analyzeChanged analyzes the statistics tables that changed enough.
func analyzeChanged(ctx context.Context, g *gorm.DB) error {
	var rows []struct {
		Relname          string
		NLiveTup         int64
		NModSinceAnalyze int64
	}
	err := g.WithContext(ctx).Raw(`SELECT relname, n_live_tup, n_mod_since_analyze FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname IN ?`, statsTables).Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("read table statistics: %w", Translate(err))
	}
	for _, r := range rows {
		if r.NModSinceAnalyze < analyzeAfter || float64(r.NModSinceAnalyze) < analyzeShare*float64(r.NLiveTup) {
			continue
		}
		// The name comes from statsTables (relname matched it), never from input.
		if err := g.WithContext(ctx).Exec("ANALYZE " + r.Relname).Error; err != nil {
			return fmt.Errorf("analyze %s: %w", r.Relname, Translate(err))
		}
	}
	return nil
}

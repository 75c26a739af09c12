package db_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/testkit"
)

// A table that grew since its last analysis gets analyzed without waiting
// for autovacuum (which looks once a minute); one that barely changed does
// not.
func TestKeepStatisticsAnalyzesWhatGrew(t *testing.T) {
	g := open(t, pgtest.NewDatabase(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := db.Migrate(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := g.Exec(`INSERT INTO change_log (resource_version, kind, op, org, project, domain, run_name, name, object_resource_version, occurred_at)
SELECT i, 'action', 'ADDED', '', 'p', 'd', 'r', 'a' || i, i, now() FROM generate_series(1, 2000) AS i`).Error; err != nil {
		t.Fatal(err)
	}
	analyzed := func(table string) bool {
		return scalar[bool](t, g, "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = ?", table)
	}
	done := make(chan error, 1)
	go func() { done <- db.KeepStatistics(ctx, g, 50*time.Millisecond, slog.Default()) }()
	testkit.Eventually(t, "change_log analyzed", time.Minute, func() bool { return analyzed("change_log") })
	if analyzed("action_events") {
		t.Fatal("action_events, unchanged, was analyzed too")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

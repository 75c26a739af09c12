package db_test

import (
	"context"
	"testing"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
)

// Migration 0006 turns every phase_transitions row into an event of the one
// history, in order, and numbers a phase entered twice in one attempt.
func TestMigrationCarriesPhaseTransitions(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g := open(t, dsn)
		if err := db.MigrateTo(ctx, g, 5); err != nil {
			t.Fatal(err)
		}
		now := db.Now()
		if err := g.Exec(`INSERT INTO actions (org, project, domain, run_name, name, phase, attempts, created_at, updated_at, resource_version)
			VALUES ('', 'p', 'd', 'r', 'a0', 5, 2, ?, ?, 1)`, now, now).Error; err != nil {
			t.Fatal(err)
		}
		id := scalar[int64](t, g, "SELECT id FROM actions WHERE name = 'a0'")
		// attempt, phase: QUEUED, RUNNING, QUEUED again (a lost launch), FAILED; then QUEUED, SUCCEEDED.
		old := [][2]int{{1, 1}, {1, 4}, {1, 1}, {1, 6}, {2, 1}, {2, 5}}
		for i, tr := range old {
			at := now.Add(time.Duration(i) * time.Second)
			if err := g.Exec("INSERT INTO phase_transitions (action_id, attempt, phase, occurred_at) VALUES (?, ?, ?, ?)", id, tr[0], tr[1], at).Error; err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Migrate(ctx, g); err != nil {
			t.Fatal(err)
		}
		var rows []struct {
			Attempt, Phase, Version int
			OccurredAt              time.Time
		}
		if err := g.Raw("SELECT attempt, phase, version, occurred_at FROM action_events WHERE action_id = ? ORDER BY id", id).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		want := [][3]int{{1, 1, 0}, {1, 4, 0}, {1, 1, 1}, {1, 6, 0}, {2, 1, 0}, {2, 5, 0}}
		if len(rows) != len(want) {
			t.Fatalf("events = %+v, want %v", rows, want)
		}
		for i, r := range rows {
			if [3]int{r.Attempt, r.Phase, r.Version} != want[i] || !r.OccurredAt.Equal(now.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("event %d = %+v, want %v at %v", i, r, want[i], now.Add(time.Duration(i)*time.Second))
			}
		}
		exists := "SELECT COUNT(*) FROM sqlite_master WHERE name = 'phase_transitions'"
		if db.Dialect(g) == db.Postgres {
			exists = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'phase_transitions'"
		}
		if n := scalar[int64](t, g, exists); n != 0 {
			t.Fatal("phase_transitions still exists: two histories")
		}
	})
}

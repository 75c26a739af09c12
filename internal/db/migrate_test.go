package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
)

func TestMigrateIsIdempotent(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g := open(t, dsn)
		if err := db.Check(ctx, g); !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("Check before Migrate = %v, want ErrPrecondition", err)
		}
		if v, err := db.Version(ctx, g); err != nil || v != 0 {
			t.Fatalf("Version of an empty database = %d, %v", v, err)
		}
		for i := 0; i < 2; i++ {
			if err := db.Migrate(ctx, g); err != nil {
				t.Fatalf("migrate #%d: %v", i+1, err)
			}
		}
		if err := db.Check(ctx, g); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if v, err := db.Version(ctx, g); err != nil || v != db.LatestVersion() {
			t.Fatalf("Version = %d, %v; want %d", v, err, db.LatestVersion())
		}
		if n := scalar[int64](t, g, "SELECT COUNT(*) FROM schema_migrations"); n != db.LatestVersion() {
			t.Fatalf("schema_migrations has %d rows, want %d", n, db.LatestVersion())
		}
	})
}

// Several "processes" (separate pools) migrate the same empty database at once.
func TestMigrateConcurrently(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		const procs = 4
		var wg sync.WaitGroup
		errc := make(chan error, procs)
		for i := 0; i < procs; i++ {
			g := open(t, dsn)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errc <- db.Migrate(ctx, g)
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				t.Fatalf("concurrent migrate: %v", err)
			}
		}
		g := open(t, dsn)
		if err := db.Check(ctx, g); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if n := scalar[int64](t, g, "SELECT COUNT(*) FROM domains"); n != 3 {
			t.Fatalf("domains seeded %d times over, want 3 rows, got %d", n/3, n)
		}
	})
}

func TestSeedData(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		g := dbtest.Migrated(t, dsn)
		var domains []string
		if err := g.Raw("SELECT id FROM domains ORDER BY position").Scan(&domains).Error; err != nil {
			t.Fatal(err)
		}
		if len(domains) != 3 || domains[0] != "development" || domains[1] != "staging" || domains[2] != "production" {
			t.Fatalf("domains = %v", domains)
		}
		if n := scalar[int64](t, g, "SELECT COUNT(*) FROM projects WHERE org = '' AND name = 'flytesnacks'"); n != 1 {
			t.Fatalf("seed project flytesnacks missing")
		}
	})
}

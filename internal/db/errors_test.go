package db_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
)

// driverWords would only appear in an error message if driver text leaked.
var driverWords = []string{"duplicate", "UNIQUE", "constraint", "SQLSTATE", "violates", "FOREIGN"}

func assertSafe(t *testing.T, err error) {
	t.Helper()
	for _, w := range driverWords {
		if strings.Contains(err.Error(), w) {
			t.Fatalf("error message leaks driver text %q: %q", w, err.Error())
		}
	}
}

func TestTranslate(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g := dbtest.Migrated(t, dsn)

		err := db.Translate(g.Exec("INSERT INTO domains (id, name, position) VALUES ('staging', 'x', 9)").Error)
		if !errors.Is(err, errs.ErrAlreadyExists) {
			t.Fatalf("duplicate insert: %v, want ErrAlreadyExists", err)
		}
		assertSafe(t, err)
		if db.Dialect(g) == db.Postgres {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Fatalf("driver error not reachable for logs: %v", err)
			}
		}
		if again := db.Translate(err); again != err {
			t.Fatalf("Translate is not idempotent")
		}

		err = db.Translate(g.Exec(`INSERT INTO tasks (org, project, domain, name, version, spec_digest, created_at)
			VALUES ('', 'p', 'd', 'n', 'v', 'no-such-digest', ?)`, db.Now()).Error)
		if !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("foreign key violation: %v, want ErrPrecondition", err)
		}
		assertSafe(t, err)

		var row struct{ ID string }
		err = db.Translate(g.Table("domains").Where("id = ?", "nope").Take(&row).Error)
		if !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("missing row: %v, want ErrNotFound", err)
		}

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err = db.WithTx(cctx, g, func(tx *gorm.DB) error { return tx.Exec("SELECT 1").Error })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled tx: %v, want context.Canceled", err)
		}

		if db.Translate(nil) != nil {
			t.Fatal("Translate(nil) != nil")
		}
		plain := errors.New("something else")
		if db.Translate(plain) != plain {
			t.Fatal("unknown errors must pass through unchanged")
		}
	})
}

func TestWithTxRollsBack(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g := dbtest.Migrated(t, dsn)
		boom := errors.New("boom")
		err := db.WithTx(ctx, g, func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO domains (id, name, position) VALUES ('qa', 'qa', 4)").Error; err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("WithTx = %v, want the fn's error", err)
		}
		if n := scalar[int64](t, g, "SELECT COUNT(*) FROM domains WHERE id = 'qa'"); n != 0 {
			t.Fatal("rolled-back insert is visible")
		}
		// A failed statement inside the tx surfaces translated.
		err = db.WithTx(ctx, g, func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO domains (id, name, position) VALUES ('staging', 'x', 9)").Error
		})
		if !errors.Is(err, errs.ErrAlreadyExists) {
			t.Fatalf("WithTx duplicate = %v", err)
		}
	})
}

// Read-modify-write transactions from many goroutines must queue, not fail
// with "database is locked".
func TestConcurrentWriters(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g := dbtest.Migrated(t, dsn)
		const workers, each = 8, 10
		var wg sync.WaitGroup
		errc := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					err := db.WithTx(ctx, g, func(tx *gorm.DB) error {
						var v int64
						if err := tx.Raw("SELECT value FROM resource_version WHERE id = 1").Scan(&v).Error; err != nil {
							return err
						}
						return tx.Exec("UPDATE resource_version SET value = ? WHERE id = 1 AND value = ?", v+1, v).Error
					})
					if err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatalf("writer failed: %v", err)
		}
		if db.Dialect(g) == db.SQLite {
			// SQLite's immediate transactions serialize the read too, so no
			// update was lost.
			if v := scalar[int64](t, g, "SELECT value FROM resource_version WHERE id = 1"); v != workers*each {
				t.Fatalf("value = %d, want %d", v, workers*each)
			}
		}
	})
}

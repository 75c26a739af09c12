// Package dbtest runs a test on both databases the manager supports: a
// fresh SQLite file and a fresh PostgreSQL database (through pgtest), as
// subtests "sqlite" and "postgres". The same assertions must hold on both.
//
// A package using it calls pgtest.Main from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dbtest.Each(t, func(t *testing.T, g *gorm.DB) { ... })
//	}
package dbtest

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
)

// Each runs fn as subtests "sqlite" and "postgres", each on a freshly
// opened and migrated database that is closed when the subtest ends.
func Each(t *testing.T, fn func(t *testing.T, g *gorm.DB)) {
	t.Helper()
	EachDSN(t, func(t *testing.T, dsn string) { fn(t, Migrated(t, dsn)) })
}

// EachDSN runs fn as subtests "sqlite" and "postgres" with the DSN of an
// empty database (no schema yet), for tests that open it themselves.
func EachDSN(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLiteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.NewDatabase(t)) })
}

// SQLiteDSN names a SQLite file in a directory of t's that does not exist
// yet, so that opening it also proves the manager creates its data dir.
func SQLiteDSN(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "db", "manager.db")
}

// Migrated opens dsn, applies every migration and closes the pool when t
// ends.
func Migrated(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	ctx := context.Background()
	g, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("dbtest: open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(g) })
	if err := db.Migrate(ctx, g); err != nil {
		t.Fatalf("dbtest: migrate: %v", err)
	}
	return g
}

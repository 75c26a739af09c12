package db_test

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// eachDialect runs fn once against a fresh SQLite file (in a directory that
// does not exist yet) and once against a fresh PostgreSQL database.
func eachDialect(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, "sqlite://"+filepath.Join(t.TempDir(), "sub", "manager.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, pgtest.NewDatabase(t))
	})
}

func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	g, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(g) })
	return g
}

func migrated(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	g := open(t, dsn)
	if err := db.Migrate(context.Background(), g); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return g
}

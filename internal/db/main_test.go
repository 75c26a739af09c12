package db_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	g, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(g) })
	return g
}

// scalar runs a query returning one value and fails the test if the query
// fails: an ignored error would leave the zero value, which some checks
// would take for a correct answer.
func scalar[T any](t *testing.T, g *gorm.DB, sql string, args ...any) T {
	t.Helper()
	var v T
	res := g.Raw(sql, args...).Scan(&v)
	if res.Error != nil {
		t.Fatalf("%s: %v", sql, res.Error)
	}
	if res.RowsAffected != 1 {
		t.Fatalf("%s: %d rows, want 1", sql, res.RowsAffected)
	}
	return v
}

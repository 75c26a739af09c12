package store_test

import (
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// suite runs fn once on a migrated SQLite file and once on a migrated
// PostgreSQL database: the same assertions must hold on both.
func suite(t *testing.T, fn func(t *testing.T, s *store.Store, g *gorm.DB)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) { fn(t, store.New(g), g) })
}

// wantErr fails unless err wraps want and its message shows no driver text.
func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	for _, w := range []string{"duplicate", "UNIQUE", "constraint", "SQLSTATE", "violates", "FOREIGN", "sqlite", "pgx"} {
		if strings.Contains(err.Error(), w) {
			t.Fatalf("error message leaks driver text %q: %q", w, err.Error())
		}
	}
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func count(t *testing.T, g *gorm.DB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := g.Raw(sql, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

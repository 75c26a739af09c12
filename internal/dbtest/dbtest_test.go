package dbtest_test

import (
	"context"
	"sync"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each visits both dialects, in their own subtests, on migrated databases
// that no other subtest shares.
func TestEach(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		if err := db.Check(context.Background(), g); err != nil {
			t.Fatalf("database is not migrated: %v", err)
		}
		// A marker row: a database reused by the other subtest would show it.
		var n int64
		if err := g.Raw("SELECT COUNT(*) FROM projects WHERE name = 'dbtest-marker'").Scan(&n).Error; err != nil || n != 0 {
			t.Fatalf("fresh database holds %d marker rows (%v)", n, err)
		}
		if err := g.Exec("INSERT INTO projects (org, name, display_name, state, created_at, updated_at) VALUES ('', 'dbtest-marker', '', 0, ?, ?)", db.Now(), db.Now()).Error; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		seen[t.Name()] = db.Dialect(g)
		mu.Unlock()
	})
	if seen["TestEach/sqlite"] != db.SQLite || seen["TestEach/postgres"] != db.Postgres || len(seen) != 2 {
		t.Fatalf("subtests and dialects = %v", seen)
	}
}

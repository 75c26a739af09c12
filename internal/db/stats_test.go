package db_test

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
)

type statsRow struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
}

func (statsRow) TableName() string { return "stats_rows" }

// TestStatementCounter sends a known sequence of statements through every
// gorm path the store uses (model API, Raw().Scan, Exec, a transaction, a
// statement that fails) and checks the counts by kind, on both databases,
// in StatementCounts and in the Prometheus metric.
func TestStatementCounter(t *testing.T) {
	for name, dsn := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "m.db") },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	} {
		t.Run(name, func(t *testing.T) {
			g := open(t, dsn(t))
			reg := prometheus.NewRegistry()
			if err := reg.Register(db.StatementCollector(g)); err != nil {
				t.Fatal(err)
			}
			before := db.StatementCounts(g)
			errorsBefore := gatherByKind(t, reg, "flyte_manager_db_errors_total")
			ctx := context.Background()
			must := func(what string, tx *gorm.DB) {
				t.Helper()
				if tx.Error != nil {
					t.Fatalf("%s: %v", what, tx.Error)
				}
			}
			must("create table", g.Exec(`CREATE TABLE stats_rows (id INTEGER PRIMARY KEY, name TEXT NOT NULL)`)) // other
			must("insert", g.Create(&statsRow{ID: 1, Name: "a"}))                                                // insert
			must("insert batch", g.Create([]statsRow{{ID: 2, Name: "b"}, {ID: 3, Name: "c"}}))                   // insert (one statement)
			var r statsRow
			must("first", g.First(&r, 1))                                    // select
			if err := g.First(&r, 99).Error; err != gorm.ErrRecordNotFound { // select, no row: not an error
				t.Fatalf("first of a missing row: %v", err)
			}
			must("update", g.Model(&statsRow{}).Where("id = ?", 1).Update("name", "z"))        // update
			must("exec update", g.Exec(`UPDATE stats_rows SET name = ? WHERE id = ?`, "y", 2)) // update
			var n int64
			must("raw count", g.Raw(`SELECT count(*) FROM stats_rows`).Scan(&n)) // select
			must("cte", g.Raw(`WITH x AS (SELECT id FROM stats_rows WHERE id > ?) SELECT count(*) FROM x`, 2).Scan(&n))
			must("cte delete", g.Exec(`WITH x AS (SELECT 3 AS id) DELETE FROM stats_rows WHERE id IN (SELECT id FROM x)`)) // delete
			if err := db.WithTx(ctx, g, func(tx *gorm.DB) error {
				if err := tx.Create(&statsRow{ID: 4, Name: "d"}).Error; err != nil { // insert
					return err
				}
				return tx.Delete(&statsRow{}, 4).Error // delete
			}); err != nil {
				t.Fatalf("tx: %v", err)
			}
			if err := g.Raw(`SELECT * FROM no_such_table`).Scan(&n).Error; err == nil { // select, fails
				t.Fatal("a query of a missing table succeeded")
			}
			if n != 1 {
				t.Fatalf("the CTE counted %d rows, want 1", n)
			}

			got := db.StatementCounts(g)
			for k, v := range before {
				got[k] -= v
			}
			want := map[string]uint64{db.KindSelect: 5, db.KindInsert: 3, db.KindUpdate: 2, db.KindDelete: 2, db.KindOther: 1}
			if !maps.Equal(got, want) {
				t.Fatalf("StatementCounts delta = %v, want %v", got, want)
			}

			if metric, after := gatherByKind(t, reg, "flyte_manager_db_statements_total"), db.StatementCounts(g); !maps.Equal(metric, after) {
				t.Fatalf("flyte_manager_db_statements_total = %v, want %v", metric, after)
			}
			// Only the query of the missing table failed.
			failed := gatherByKind(t, reg, "flyte_manager_db_errors_total")
			for k, v := range errorsBefore {
				failed[k] -= v
			}
			if want := map[string]uint64{db.KindSelect: 1, db.KindInsert: 0, db.KindUpdate: 0, db.KindDelete: 0, db.KindOther: 0}; !maps.Equal(failed, want) {
				t.Fatalf("flyte_manager_db_errors_total delta = %v, want %v", failed, want)
			}
		})
	}
}

// gatherByKind is the counter family name of reg by its kind label.
func gatherByKind(t *testing.T, reg *prometheus.Registry, name string) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	metric := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					metric[l.GetValue()] = uint64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return metric
}

func TestStatementKind(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 1":                                 db.KindSelect,
		"  (select 1) UNION (select 2)":            db.KindSelect,
		"-- why\n/* c */ INSERT INTO t VALUES (1)": db.KindInsert,
		"update t set a = 1":                       db.KindUpdate,
		"DELETE FROM t":                            db.KindDelete,
		"WITH a AS (SELECT 1), b AS(DELETE FROM t RETURNING 1) UPDATE t SET x = 1": db.KindUpdate,
		`WITH "select" AS (SELECT 1) INSERT INTO t SELECT * FROM "select"`:         db.KindInsert,
		"WITH RECURSIVE r(n) AS (VALUES (1)) SELECT n FROM r":                      db.KindSelect,
		"PRAGMA journal_mode":           db.KindOther,
		"CREATE TABLE t (a int)":        db.KindOther,
		"BEGIN":                         db.KindOther,
		"":                              db.KindOther,
		"UPDATEx":                       db.KindOther,
		"VALUES (1)":                    db.KindSelect,
		"WITH a AS (SELECT 1) selected": db.KindOther,
	} {
		if got := db.StatementKind(sql); got != want {
			t.Errorf("StatementKind(%q) = %s, want %s", sql, got, want)
		}
	}
}

package db_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"
	sqlitedrv "modernc.org/sqlite"

	"fmgr.dev/internal/db"
)

// probeCompiles counts how often SQLite compiled a statement reading the
// column probe.x: SQLite asks a connection's authorizer about every column
// a statement reads while it compiles it, and never when it runs it again.
var probeCompiles atomic.Int64

func init() {
	sqlitedrv.RegisterConnectionHook(func(c sqlitedrv.ExecQuerierContext, _ string) error {
		return c.(sqlitedrv.AuthorizerRegisterer).RegisterAuthorizer(
			func(action sqlitedrv.AuthorizerActionCode, table, column, _, _ string) sqlitedrv.AuthorizerReturnCode {
				if action == sqlitedrv.AuthRead && table == "probe" && column == "x" {
					probeCompiles.Add(1)
				}
				return sqlitedrv.AuthorizerOK
			})
	})
}

// The same statement, run in transaction after transaction and outside
// them, is compiled once per connection, not once per transaction (every
// action write is a transaction; compiling its statements again each time
// was a fifth of the manager's CPU).
func TestSQLiteCompilesAStatementOncePerConnection(t *testing.T) {
	g := open(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	sqlDB, err := g.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1) // one connection: every compilation after the first is a recompilation
	ctx := context.Background()
	if err := g.Exec("CREATE TABLE probe (x INTEGER)").Error; err != nil {
		t.Fatal(err)
	}
	read := func(q *gorm.DB, want int64) {
		t.Helper()
		var n int64
		if err := q.Raw("SELECT COUNT(*) FROM probe WHERE x = ?", 1).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("read %d rows, want %d", n, want)
		}
	}
	write := func(tx *gorm.DB) error {
		read(tx, 0)
		if err := tx.Exec("INSERT INTO probe (x) VALUES (?)", 2).Error; err != nil {
			return err
		}
		return nil
	}
	if err := db.WithTx(ctx, g, write); err != nil {
		t.Fatal(err)
	}
	first := probeCompiles.Load()
	if first == 0 {
		t.Fatal("the authorizer saw no compilation: the probe does not work")
	}
	// Only in transactions, as action writes run them.
	for range 20 {
		if err := db.WithTx(ctx, g, write); err != nil {
			t.Fatal(err)
		}
	}
	if n := probeCompiles.Load(); n != first {
		t.Fatalf("SQLite compiled the probe's statement again: %d authorizer calls after the first transaction, %d after 20 more",
			first, n)
	}
	// And outside them, on the same connection.
	for range 5 {
		read(g, 0)
	}
	if n := probeCompiles.Load(); n != first {
		t.Fatalf("SQLite compiled the probe's statement again outside a transaction: %d authorizer calls, want %d", n, first)
	}
	// The cached statement still reads what later writes changed.
	if err := g.Exec("INSERT INTO probe (x) VALUES (?)", 1).Error; err != nil {
		t.Fatal(err)
	}
	read(g, 1)
}

// A statement whose rows are still being read is not reused under them: a
// second run of the same query on the connection (possible in a
// transaction) reads its own rows.
func TestSQLiteStatementCacheSameQueryWhileReading(t *testing.T) {
	g := open(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	sqlDB, err := g.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sqlDB.ExecContext(ctx, "CREATE TABLE probe (x INTEGER); INSERT INTO probe VALUES (1), (2), (3)"); err != nil {
		t.Fatal(err)
	}
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	const q = "SELECT x FROM probe ORDER BY x"
	outer, err := tx.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for outer.Next() {
		var x int
		if err := outer.Scan(&x); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
		inner, err := tx.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			n++
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Fatalf("inner read %d rows, want 3", n)
		}
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	_ = outer.Close()
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("outer read %v, want [1 2 3]", got)
	}
}

// SQLite keeps temporary files in memory: group commit takes a savepoint
// per writer, whose statement journal would otherwise spill to a file in
// every batch of more than a few writers.
func TestSQLiteTemporaryFilesInMemory(t *testing.T) {
	g := open(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	if got := scalar[int](t, g, "PRAGMA temp_store"); got != 2 {
		t.Fatalf("temp_store = %d, want 2 (MEMORY)", got)
	}
}

package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"fmgr.dev/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each call gives a separate, empty, reachable database.
func TestNewDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if a == b {
		t.Fatalf("two tests share %s", a)
	}
	for _, dsn := range []string{a, b} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var version, tables int
		if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if version < 150000 || tables != 0 {
			t.Fatalf("server version %d, %d tables in a fresh database", version, tables)
		}
	}
}

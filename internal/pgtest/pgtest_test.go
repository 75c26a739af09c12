package pgtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// A started server listens on no TCP address, only on the socket in its own
// directory, and its DSN reaches it there: a test can never end up on
// another test binary's server by a port collision.
func TestStartListensOnlyOnItsSocket(t *testing.T) {
	ctx := context.Background()
	s, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	dsn := s.DSN("postgres")
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsn, err)
	}
	if cfg.Host != s.SocketDir() {
		t.Fatalf("DSN %s connects to host %q, want the socket directory %s", dsn, cfg.Host, s.SocketDir())
	}
	if fi, err := os.Stat(filepath.Join(s.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", cfg.Port))); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket in %s: %v", s.SocketDir(), err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var listen string
	if err := conn.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if listen != "" {
		t.Fatalf("listen_addresses = %q, want none (socket only)", listen)
	}
}

// A server started with Options.StatStatements has pg_stat_statements
// loaded: the extension can be created and counts the statements sent.
func TestStartWithStatStatements(t *testing.T) {
	s, err := pgtest.StartWith(pgtest.Options{StatStatements: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !s.StatStatements() {
		t.Fatal("pg_stat_statements is installed with the server binaries (/usr/lib/postgresql/15/lib), but the server does not preload it")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := conn.Exec(ctx, "SELECT 42 AS pgtest_marker"); err != nil {
			t.Fatal(err)
		}
	}
	var calls int64
	err = conn.QueryRow(ctx, "SELECT COALESCE(SUM(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE '%pgtest_marker%' AND query NOT LIKE '%pg_stat_statements%'").Scan(&calls)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("pg_stat_statements counted %d calls of the marker query, want 3", calls)
	}
}

package db_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

func TestOpenRejectsUnknownDSN(t *testing.T) {
	for _, dsn := range []string{"", "mysql://u:hunter2@h/db", "sqlite://", "sqlite://:memory:", "host=x password=hunter2"} {
		_, err := db.Open(context.Background(), dsn)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("Open(%q) error leaks the password: %v", dsn, err)
		}
	}
}

func TestOpenUnreachablePostgresHidesPassword(t *testing.T) {
	// A socket directory of our own that nothing listens in: unlike a port
	// probed free, no other process can take it meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := db.Open(ctx, "postgres://fm:hunter2@/fm?host="+t.TempDir()+"&sslmode=disable&connect_timeout=2")
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Open = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestOpenSQLiteSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "m.db")
	for _, dsn := range []string{"sqlite://" + path, "file:" + path} {
		g := open(t, dsn)
		if db.Dialect(g) != db.SQLite {
			t.Fatalf("dialect = %s", db.Dialect(g))
		}
		mode := scalar[string](t, g, "PRAGMA journal_mode")
		fk := scalar[int](t, g, "PRAGMA foreign_keys")
		busy := scalar[int](t, g, "PRAGMA busy_timeout")
		if mode != "wal" || fk != 1 || busy < 1000 {
			t.Fatalf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, busy)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("database file not created: %v", err)
		}
	}
}

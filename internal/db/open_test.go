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

// A SQLite database is private wherever it lives: a new one is created
// 0600 in a 0700 directory, an existing one that other users may read is
// tightened to 0600 before SQLite opens it, and so the -wal and -shm files
// SQLite creates with the database file's mode are 0600 too.
func TestOpenSQLiteKeepsFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new", "m.db")
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil { // empty: a new database to SQLite
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil { // whatever the test's umask
		t.Fatal(err)
	}
	for path, want := range map[string]map[string]os.FileMode{
		fresh: {filepath.Dir(fresh): 0o700, fresh: 0o600, fresh + "-wal": 0o600, fresh + "-shm": 0o600},
		old:   {old: 0o600, old + "-wal": 0o600, old + "-shm": 0o600},
	} {
		g := open(t, "sqlite://"+path)
		if err := g.Exec("CREATE TABLE t (x INTEGER)").Error; err != nil { // a write: the -wal exists now
			t.Fatal(err)
		}
		for p, mode := range want {
			info, err := os.Stat(p)
			if err != nil {
				t.Error(err)
				continue
			}
			if got := info.Mode().Perm(); got != mode {
				t.Errorf("%s has mode %04o, want %04o", p, got, mode)
			}
		}
	}
}

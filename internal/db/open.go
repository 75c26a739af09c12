// Package db opens the manager's database (SQLite in embedded mode,
// PostgreSQL in production), owns its schema migrations and translates
// driver errors into the errs vocabulary. Everything above it talks to a
// *gorm.DB and never needs to know which dialect it got.
package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"fmgr.dev/internal/dsn"
	"fmgr.dev/internal/errs"
)

// Dialect names, as returned by Dialect.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// busyTimeout is how long a SQLite writer waits for the write lock before
// giving up; with immediate transactions every writer queues here.
const busyTimeout = 10 * time.Second

// Open connects to the database named by dsn and checks that it answers.
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	sqlite:///var/lib/flyte/manager.db                 (also sqlite://relative.db)
//	file:/var/lib/flyte/manager.db
//
// The returned error never contains the DSN's password.
func Open(ctx context.Context, dsn string) (*gorm.DB, error) {
	dialect, target, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg := &gorm.Config{
		Logger: logger.Discard, // we log ourselves, and gorm would print SQL with arguments
		// Multi-statement writes use WithTx explicitly; a lone INSERT needs no wrapper.
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true, // we ping below, with ctx
		NowFunc:                Now,
	}
	var dialector gorm.Dialector
	switch dialect {
	case Postgres:
		dialector = postgres.New(postgres.Config{DSN: target})
	case SQLite:
		if err := privateSQLite(sqlitePath(target)); err != nil {
			return nil, err
		}
		// Its connections keep their compiled statements themselves
		// (stmtcache.go), inside transactions too, which gorm's
		// PrepareStmt does not.
		dialector = sqliteDialector{dsn: target}
	}
	gdb, err := gorm.Open(dialector, cfg)
	if err != nil {
		return nil, openError(dsn, err)
	}
	if err := gdb.Use(&statementCounter{}); err != nil { // stats.go
		return nil, openError(dsn, err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, openError(dsn, err)
	}
	switch dialect {
	case Postgres:
		// As many idle as open: with fewer, a burst beyond the idle count
		// closes connections as they come back and opens new ones for the
		// next burst, a PostgreSQL backend (a fork) and a cold statement
		// cache each time. Idle ones still go after ConnMaxIdleTime.
		sqlDB.SetMaxOpenConns(20)
		sqlDB.SetMaxIdleConns(20)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		sqlDB.SetConnMaxLifetime(time.Hour)
	case SQLite:
		// WAL lets readers run beside the one writer; more connections than
		// this only queue on the write lock.
		n := max(4, runtime.NumCPU())
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n)
		sqlDB.SetConnMaxIdleTime(0)
		sqlDB.SetConnMaxLifetime(0)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, openError(dsn, err)
	}
	return gdb, nil
}

// Close releases the connection pool behind db.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Dialect reports which database db talks to: Postgres or SQLite.
func Dialect(db *gorm.DB) string {
	return db.Dialector.Name()
}

// Now is the clock every stored timestamp comes from: UTC (so SQLite's text
// timestamps sort in time order) at the microsecond precision PostgreSQL
// keeps (so a value reads back exactly as written).
func Now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}

// Time normalizes t the way Now does.
func Time(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// parseDSN picks the dialect and returns the driver's own connection string.
func parseDSN(dsn string) (dialect, target string, err error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return "", "", fmt.Errorf("database DSN %s is not a valid URL", redact(dsn))
		}
		return Postgres, dsn, nil
	case strings.HasPrefix(dsn, "sqlite://"):
		return sqliteTarget(strings.TrimPrefix(dsn, "sqlite://"), dsn)
	case strings.HasPrefix(dsn, "file:"):
		return sqliteTarget(strings.TrimPrefix(dsn, "file:"), dsn)
	}
	return "", "", fmt.Errorf("database DSN %s: want postgres://, postgresql://, sqlite:// or file:", redact(dsn))
}

// sqliteTarget builds the driver DSN "<path>?<params>": our pragmas first,
// then whatever the user added (a later pragma of the same name wins).
func sqliteTarget(rest, dsn string) (string, string, error) {
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" || path == ":memory:" {
		// Every pooled connection would get its own empty in-memory database.
		return "", "", fmt.Errorf("database DSN %s: SQLite needs a file path", redact(dsn))
	}
	user, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", "", fmt.Errorf("database DSN %s: bad query parameters", redact(dsn))
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Temporary files in memory: above all the statement journal of the
	// savepoints that group commit takes per writer, which otherwise
	// spills to a temporary file (open, write, close) in every batch of
	// more than a few writers.
	q.Add("_pragma", "temp_store(MEMORY)")
	// BEGIN IMMEDIATE takes the write lock up front, so concurrent writers
	// wait for each other (busy_timeout) instead of failing with SQLITE_BUSY
	// when a read transaction tries to upgrade.
	q.Set("_txlock", "immediate")
	for k, vs := range user {
		if k == "_pragma" {
			q[k] = append(q[k], vs...)
			continue
		}
		q[k] = vs
	}
	return SQLite, path + "?" + q.Encode(), nil
}

func sqlitePath(target string) string {
	path, _, _ := strings.Cut(target, "?")
	return path
}

// redact is dsn as it may appear in messages (internal/dsn's redactor).
func redact(s string) string { return dsn.Redact(s) }

// openError is for the operator starting the process, so it keeps the
// driver's reason beside the sentinel, minus every secret the DSN holds (the
// driver may quote its connection string).
func openError(s string, err error) error {
	reason := err.Error()
	for _, secret := range dsn.Secrets(s) {
		reason = strings.ReplaceAll(reason, secret, dsn.Redacted)
	}
	kind := errs.ErrUnavailable
	var e *Error
	if errors.As(Translate(err), &e) {
		kind = e.Kind
	}
	return fmt.Errorf("open database %s: %w: %s", redact(s), kind, reason)
}

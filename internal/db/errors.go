package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"fmgr.dev/internal/errs"
)

// Error is a driver failure translated into one of the errs sentinels (or a
// context error). Its message is only the sentinel's, so it is safe to hand
// to a client; the driver's error stays reachable through errors.As and
// Cause for logs.
type Error struct {
	Kind  error // an errs sentinel, context.Canceled or context.DeadlineExceeded
	cause error
}

func (e *Error) Error() string { return e.Kind.Error() }

// Unwrap exposes both the sentinel (for errors.Is) and the driver error
// (for errors.As on *pgconn.PgError and friends).
func (e *Error) Unwrap() []error { return []error{e.Kind, e.cause} }

// Cause is the driver's error, for logs only.
func (e *Error) Cause() error { return e.cause }

// Translate maps a driver or gorm error to our vocabulary. Errors it does
// not recognise come back unchanged: callers wrap them with context and the
// server reports them as internal (masking their text). It is idempotent and
// leaves errors that already carry a sentinel alone.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	if kind := classify(err); kind != nil {
		return &Error{Kind: kind, cause: err}
	}
	return err
}

func classify(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return errs.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifyPostgres(pgErr.Code)
	}
	var liteErr *sqlitedrv.Error
	if errors.As(err, &liteErr) {
		return classifySQLite(liteErr.Code())
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		pgconn.SafeToRetry(err):
		return errs.ErrUnavailable
	}
	return nil
}

// classifyPostgres maps SQLSTATE codes (Appendix A of the PostgreSQL manual).
func classifyPostgres(code string) error {
	switch code {
	case "23505": // unique_violation
		return errs.ErrAlreadyExists
	case "23503": // foreign_key_violation: what it points at is missing
		return errs.ErrPrecondition
	case "23502", "23514", "22001", "22P02", "22021": // not null, check, too long, bad text, bad encoding
		return errs.ErrInvalid
	case "40001", "40P01": // serialization failure, deadlock: someone else won
		return errs.ErrConflict
	case "57014": // query_canceled (statement_timeout)
		return context.DeadlineExceeded
	case "57P01", "57P02", "57P03", "55P03", "53300": // shutdown, cannot connect now, lock not available, too many connections
		return errs.ErrUnavailable
	}
	if strings.HasPrefix(code, "08") { // connection exception class
		return errs.ErrUnavailable
	}
	return nil
}

// classifySQLite maps SQLite result codes; the driver turns extended codes on.
func classifySQLite(code int) error {
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return errs.ErrAlreadyExists
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return errs.ErrPrecondition
	case sqlite3.SQLITE_CONSTRAINT_NOTNULL, sqlite3.SQLITE_CONSTRAINT_CHECK:
		return errs.ErrInvalid
	}
	switch code & 0xff { // primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY:
		return errs.ErrUnavailable
	case sqlite3.SQLITE_INTERRUPT:
		return context.Canceled
	}
	return nil
}

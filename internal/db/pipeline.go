package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// Piped is one statement of a pipeline: SQL with $n placeholders (see
// Placeholders) and its arguments. Row, when set, receives the columns of
// the statement's one row (a RETURNING); otherwise Rows receives how many
// rows it affected.
type Piped struct {
	SQL  string
	Args []any
	Row  []any
	Rows int64
}

// Pipeline sends stmts on conn, a PostgreSQL connection, as one pipeline:
// every statement goes out before the first answer is read, so n statements
// cost one round trip instead of n. They run in order; the first that fails
// stops the rest, and Pipeline returns its index with the error (translated)
// and -1 otherwise. Inside a transaction, a failure aborts the transaction.
// The statements are counted as gorm's are (flyte_manager_db_statements_total),
// on counter, the DB that conn came from.
func Pipeline(ctx context.Context, counter *gorm.DB, conn *sql.Conn, stmts []Piped) (int, error) {
	if len(stmts) == 0 {
		return -1, nil
	}
	failed, err := -1, error(nil)
	rerr := conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("pipeline: not a PostgreSQL connection (%T)", dc)
		}
		b := &pgx.Batch{}
		for _, s := range stmts {
			b.Queue(s.SQL, s.Args...)
		}
		br := sc.Conn().SendBatch(ctx, b)
		for i := range stmts {
			s := &stmts[i]
			if s.Row != nil {
				err = br.QueryRow().Scan(s.Row...)
			} else {
				var tag interface{ RowsAffected() int64 }
				tag, err = br.Exec()
				if err == nil {
					s.Rows = tag.RowsAffected()
				}
			}
			countPiped(counter, s.SQL, err)
			if err != nil {
				failed = i
				break
			}
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			failed, err = len(stmts)-1, cerr
		}
		if sc.Conn().IsClosed() {
			return driver.ErrBadConn // database/sql drops it instead of pooling it
		}
		return nil
	})
	if err == nil && rerr != nil {
		return 0, Translate(rerr)
	}
	if err != nil {
		return failed, Translate(err)
	}
	return -1, nil
}

// Discard makes database/sql close conn instead of pooling it again: for a
// connection left in a state nobody should inherit (a transaction that
// could not be rolled back).
func Discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// CheckFailed reports whether err is a pipelined statement's own check
// failing: a statement that must affect a number of rows cannot wait for
// the client to look at its count before the next goes out, so it looks
// itself and divides by zero when the count is not the one it expects
// (SELECT 1 / (count = want)::int). No other statement the manager sends
// divides.
func CheckFailed(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "22012" // division_by_zero
}

// ReleaseIdle closes conn, a PostgreSQL connection, instead of pooling it
// again when a transaction is still open on it: a guard for code that
// sends BEGIN itself.
func ReleaseIdle(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		if sc, ok := dc.(*stdlib.Conn); ok && sc.Conn().PgConn().TxStatus() != 'I' {
			return driver.ErrBadConn
		}
		return nil
	})
}

// Placeholders is sql (with gorm's ? placeholders, slices expanded as for
// IN ?) and args as PostgreSQL's $n form takes them, built by gorm without
// sending anything.
func Placeholders(g *gorm.DB, sql string, args ...any) (string, []any) {
	st := g.Session(&gorm.Session{DryRun: true, NewDB: true}).Exec(sql, args...).Statement
	return st.SQL.String(), st.Vars
}

// countPiped counts a statement sent outside gorm; transaction control is
// not counted, as it is not through gorm.
func countPiped(g *gorm.DB, sql string, err error) {
	c := counterOf(g)
	if c == nil {
		return
	}
	switch strings.ToUpper(sql) {
	case "BEGIN", "COMMIT", "ROLLBACK":
		return
	}
	c.add(sql, err != nil && !errors.Is(err, pgx.ErrNoRows))
}

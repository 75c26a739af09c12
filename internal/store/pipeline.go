package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Pipelined batches (PostgreSQL). A batch's statements went out one after
// another on its one connection, each waiting for the answer to the one
// before: BEGIN, the resource version, the fence, every job's statements,
// the version written back, COMMIT. The committer is the pool's one
// writer, so those round trips bounded every action write. A piped job
// (the executor's UpdateFrom, a plain create) reads nothing and only needs
// to know, at the end, that its statement affected the row it meant to:
// its statements are recorded and go out with every other piped job's,
// the fences, the version written back and COMMIT, as one pipeline. A
// batch costs two round trips (BEGIN with the version, then the pipeline)
// plus those of its jobs that read, instead of five plus one per
// statement. A recorded statement that must affect a number of rows
// checks that itself and fails when it did not (db.CheckFailed), which
// keeps COMMIT from running.
//
// Failure keeps the rules of batch.go: a statement that fails, or whose
// check fails, fails its job and rolls the transaction back (nothing of
// the batch committed), and the others run again, each in a savepoint, as
// for any replay job that fails; a job whose check failed with
// errTakeTheLongWay runs again with them. A job that fails while it is
// being recorded sent nothing: it fails alone, its versions are handed out
// again.

// recorder holds a pipelined batch's piped statements until they are sent.
type recorder struct {
	stmts []recorded
	job   int      // the index of the job being recorded
	g     *gorm.DB // for building statements (dry runs) only
}

type recorded struct {
	sql  string // gorm's ? placeholders
	args []any
	row  []any // where the statement's one row goes; nil: it returns none
	// mismatch is the job's error when the statement's own check fails
	// (db.CheckFailed): it did not affect the rows the job expects.
	mismatch error
	job      int
}

func (r *recorder) add(sql string, args, row []any, mismatch error) {
	r.stmts = append(r.stmts, recorded{sql: sql, args: args, row: row, mismatch: mismatch, job: r.job})
}

// errTakeTheLongWay is a piped job's mismatch when the job can tell what
// went wrong only by reading (a create that found its action already there
// or its parent missing): the batch rolls back and the job runs again with
// the others, reading, as a job that is not piped.
var errTakeTheLongWay = errors.New("store: the piped write must be run again, reading")

// runPipelined is runBatch without savepoints, for PostgreSQL, as above.
func (c *committer) runPipelined(ctx context.Context, jobs []*job, outcome []error) (failed int) {
	failed = -1
	err := c.db.WithContext(ctx).Connection(func(tx *gorm.DB) error {
		conn, ok := tx.Statement.ConnPool.(*sql.Conn)
		if !ok {
			return fmt.Errorf("pipelined batch: no connection of its own (%T)", tx.Statement.ConnPool)
		}
		defer db.ReleaseIdle(conn)
		// Each job's statements start from a clean statement on conn.
		failed = c.pipelinedTx(ctx, tx.Session(&gorm.Session{NewDB: true}), conn, jobs, outcome)
		return nil
	})
	if err != nil {
		failAll(outcome, fmt.Errorf("begin: %w", db.Translate(err)))
	}
	return failed
}

func (c *committer) pipelinedTx(ctx context.Context, tx *gorm.DB, conn *sql.Conn, jobs []*job, outcome []error) int {
	var reserved int64
	begin := []db.Piped{{SQL: "BEGIN"}, {SQL: reserveSQL, Row: []any{&reserved}}}
	if _, err := db.Pipeline(ctx, c.db, conn, begin); err != nil {
		c.rollback(conn)
		failAll(outcome, fmt.Errorf("take resource version: %w", err))
		return -1
	}
	if reserved == 0 {
		c.rollback(conn)
		failAll(outcome, fmt.Errorf("take resource version: counter row missing: %w", errs.ErrPrecondition))
		return -1
	}
	b := &batch{reserved: reserved, last: reserved - 1}
	committed := 0
	// Jobs that read go first, a statement at a time, as in runBatch.
	w := &writeTx{tx: tx, b: b}
	for i, j := range jobs {
		if j.kind == jobPiped {
			continue
		}
		if outcome[i] = j.ctx.Err(); outcome[i] != nil {
			continue
		}
		if outcome[i] = run(w, j.fn); outcome[i] != nil {
			c.rollback(conn)
			return i
		}
		committed++
	}
	rec := &recorder{g: tx}
	pw := &writeTx{b: b, rec: rec}
	for i, j := range jobs {
		if j.kind != jobPiped {
			continue
		}
		if outcome[i] = j.ctx.Err(); outcome[i] != nil {
			continue
		}
		last, fences, sent := b.last, len(b.fences), len(rec.stmts)
		rec.job = i
		if outcome[i] = run(pw, j.fn); outcome[i] != nil {
			b.last, b.fences, rec.stmts = last, b.fences[:fences], rec.stmts[:sent]
			continue
		}
		committed++
	}
	if committed == 0 {
		c.rollback(conn)
		return -1
	}
	stmts := make([]db.Piped, 0, len(rec.stmts)+2)
	for _, r := range rec.stmts {
		sql, args := db.Placeholders(tx, r.sql, r.args...)
		stmts = append(stmts, db.Piped{SQL: sql, Args: args, Row: r.row})
	}
	if b.last != b.reserved {
		stmts = append(stmts, db.Piped{SQL: settleSQL, Args: []any{b.last}})
	}
	stmts = append(stmts, db.Piped{SQL: "COMMIT"})
	if i, err := db.Pipeline(ctx, c.db, conn, stmts); err != nil {
		c.rollback(conn)
		if i >= 0 && i < len(rec.stmts) {
			r := rec.stmts[i]
			if outcome[r.job] = fmt.Errorf("write: %w", err); r.mismatch != nil && db.CheckFailed(err) {
				outcome[r.job] = r.mismatch
			}
			return r.job
		}
		failAll(outcome, fmt.Errorf("commit: %w", err))
		return -1
	}
	if b.changed() {
		c.committed()
	}
	return -1
}

// rollback ends a pipelined batch's transaction, on a context of its own:
// the batch's may be why it ends. A connection that cannot say ROLLBACK is
// closed rather than pooled with a transaction open.
func (c *committer) rollback(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.Pipeline(ctx, c.db, conn, []db.Piped{{SQL: "ROLLBACK"}}); err != nil {
		db.Discard(conn)
	}
}

// failAll sets err as the outcome of every job that has none yet.
func failAll(outcome []error, err error) {
	for i := range outcome {
		if outcome[i] == nil {
			outcome[i] = err
		}
	}
}

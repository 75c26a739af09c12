package store

import (
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
)

// chain sends the statements of one action write whose results the write
// does not read. On PostgreSQL every statement is a round trip on the
// batch's one connection, one after another, and those round trips bounded
// the writes: a chain holds them back and sends them with the write's
// last statement as one, each a data-modifying WITH query of it
// ("WITH s1 AS (UPDATE ...), s2 AS (INSERT ...) UPDATE ..."). PostgreSQL
// runs the parts of such a statement on one snapshot, in no set order, and
// fails the whole statement if one fails; so a part never depends on
// another's effect (see add's key). On SQLite, where a statement costs no
// round trip, each is sent when added, as before. A piped job's chain goes
// one step further: its statements wait for the batch's pipeline
// (pipeline.go), with every other piped job's.
type chain struct {
	tx      *gorm.DB
	combine bool
	queued  []statement
	// rec, when set, takes the statements instead of tx: the write is a
	// piped job of a batch whose statements go out as one pipeline.
	rec *recorder
}

type statement struct {
	key  string
	sql  string
	args []any
}

func newChain(tx *gorm.DB) *chain {
	return &chain{tx: tx, combine: tx.Dialector.Name() == db.Postgres}
}

// chain is a chain for the job's writes: recorded for the batch's
// pipeline when the job is piped, sent on its transaction otherwise.
func (w *writeTx) chain() *chain {
	if w.rec != nil {
		return &chain{combine: true, rec: w.rec}
	}
	return newChain(w.tx)
}

// add queues a statement (an INSERT, UPDATE or DELETE without RETURNING).
// Statements with the same non-empty key read what an earlier one writes
// (the next free event version): the earlier ones are sent first.
func (c *chain) add(key, sql string, args ...any) error {
	if !c.combine {
		if err := c.tx.Exec(sql, args...).Error; err != nil {
			return db.Translate(err)
		}
		return nil
	}
	if key != "" && slices.ContainsFunc(c.queued, func(s statement) bool { return s.key == key }) {
		if err := c.flush(); err != nil {
			return err
		}
	}
	c.queued = append(c.queued, statement{key: key, sql: sql, args: args})
	return nil
}

// exec sends sql with every statement still queued and returns the rows
// sql affected (-1 when the chain records for a pipeline: not known yet).
func (c *chain) exec(sql string, args ...any) (int64, error) {
	sql, args = c.compose(sql, args)
	if c.rec != nil {
		c.rec.add(sql, args, nil, nil)
		return -1, nil
	}
	res := c.tx.Exec(sql, args...)
	if res.Error != nil {
		return 0, db.Translate(res.Error)
	}
	return res.RowsAffected, nil
}

// expect is exec for a last statement that must affect want rows, failing
// with mismatch when it does not; when the chain records for a pipeline,
// the check waits for the pipeline's answer.
func (c *chain) expect(want int64, mismatch error, sql string, args ...any) error {
	if c.rec != nil {
		c.queued = append(c.queued, statement{sql: sql + " RETURNING 1", args: args})
		c.record(fmt.Sprintf(checkSQL, len(c.queued)), []any{want}, nil, mismatch)
		return nil
	}
	n, err := c.exec(sql, args...)
	if err != nil {
		return err
	}
	if n != want {
		return mismatch
	}
	return nil
}

// checkSQL ends a recorded statement whose last part (the last queued,
// with RETURNING 1) must affect ? rows: it fails the statement otherwise
// (db.CheckFailed).
const checkSQL = "SELECT 1 / ((SELECT COUNT(*) FROM s%[1]d) = ?)::int"

// record records sql with every statement still queued, as one, for the
// batch's pipeline: its row goes to row, and when its own check fails
// (db.CheckFailed) its job fails with mismatch.
func (c *chain) record(sql string, args, row []any, mismatch error) {
	sql, args = c.compose(sql, args)
	c.rec.add(sql, args, row, mismatch)
}

// compose is sql with every statement still queued before it, as one.
func (c *chain) compose(sql string, args []any) (string, []any) {
	if len(c.queued) == 0 {
		return sql, args
	}
	var b strings.Builder
	var all []any
	b.WriteString("WITH ")
	for i, s := range c.queued {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "s%d AS (%s)", i+1, s.sql)
		all = append(all, s.args...)
	}
	b.WriteString(" ")
	b.WriteString(sql)
	c.queued = c.queued[:0]
	return b.String(), append(all, args...)
}

// flush sends what is queued.
func (c *chain) flush() error {
	if len(c.queued) == 0 {
		return nil
	}
	last := c.queued[len(c.queued)-1]
	c.queued = c.queued[:len(c.queued)-1]
	_, err := c.exec(last.sql, last.args...)
	return err
}

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
// round trip, each is sent when added, as before.
type chain struct {
	tx      *gorm.DB
	combine bool
	queued  []statement
}

type statement struct {
	key  string
	sql  string
	args []any
}

func newChain(tx *gorm.DB) *chain {
	return &chain{tx: tx, combine: tx.Dialector.Name() == db.Postgres}
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
// sql affected.
func (c *chain) exec(sql string, args ...any) (int64, error) {
	if len(c.queued) > 0 {
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
		sql, args = b.String(), append(all, args...)
		c.queued = c.queued[:0]
	}
	res := c.tx.Exec(sql, args...)
	if res.Error != nil {
		return 0, db.Translate(res.Error)
	}
	return res.RowsAffected, nil
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

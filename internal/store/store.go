// Package store holds the repositories over the manager's database:
// projects, tasks and actions (runs are root actions). They take and return
// plain Go structs, never protos, and report failures with the errs
// sentinels. Every write that changes an action also takes a new global
// resource version and appends to change_log in the same transaction, which
// is what watches read. Concurrent action writes share transactions (group
// commit, batch.go).
package store

import (
	"context"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
)

// Store bundles the repositories over one database handle.
type Store struct {
	db       *gorm.DB
	w        writes
	Projects *Projects
	Tasks    *Tasks
	Actions  *Actions
	Leases   *Leases
	Triggers *Triggers
	// Retention is the collector's view (internal/retention).
	Retention *Retention
}

// New returns repositories over gdb. Over a pool, concurrent action writes
// are committed in batches; over a transaction, they nest in it.
func New(gdb *gorm.DB) *Store {
	w := writes{tx: gdb}
	if _, inTx := gdb.Statement.ConnPool.(gorm.TxCommitter); !inTx {
		w = writes{c: &committer{db: gdb, pipelined: db.Dialect(gdb) == db.Postgres}}
	}
	return build(gdb, w)
}

func build(gdb *gorm.DB, w writes) *Store {
	return &Store{
		db:        gdb,
		w:         w,
		Projects:  &Projects{db: gdb},
		Tasks:     &Tasks{db: gdb},
		Actions:   &Actions{db: gdb, w: w},
		Leases:    &Leases{db: gdb},
		Triggers:  &Triggers{db: gdb},
		Retention: &Retention{db: gdb, w: w},
	}
}

// InTx runs fn with repositories that all write through one transaction,
// for changes that must land together (e.g. aborting every action of a
// run): one job of a batch (see batch.go), rolled back alone if fn fails.
// Repository methods nest inside it as savepoints. Inside fn, action writes
// run on the batch's context: ctx is checked before each, but a call under
// way is not cut short.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return s.w.run(ctx, func(w *writeTx) error { return fn(build(w.tx, writes{in: w})) })
}

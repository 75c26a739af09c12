// Package store holds the repositories over the manager's database:
// projects, tasks and actions (runs are root actions). They take and return
// plain Go structs, never protos, and report failures with the errs
// sentinels. Every write that changes an action also bumps the global
// resource version and appends to change_log in the same transaction, which
// is what watches read.
package store

import (
	"context"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
)

// Store bundles the repositories over one database handle.
type Store struct {
	db       *gorm.DB
	Projects *Projects
	Tasks    *Tasks
	Actions  *Actions
	Leases   *Leases
}

// New returns repositories over gdb (a pool or a transaction).
func New(gdb *gorm.DB) *Store {
	return &Store{
		db:       gdb,
		Projects: &Projects{db: gdb},
		Tasks:    &Tasks{db: gdb},
		Actions:  &Actions{db: gdb},
		Leases:   &Leases{db: gdb},
	}
}

// InTx runs fn with repositories that all write through one transaction,
// for changes that must land together (e.g. aborting every action of a
// run). Repository methods nest inside it as savepoints.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return db.WithTx(ctx, s.db, func(tx *gorm.DB) error { return fn(New(tx)) })
}

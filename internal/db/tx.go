package db

import (
	"context"

	"gorm.io/gorm"
)

// WithTx runs fn in one transaction on db and commits if fn returns nil.
// Everything fn writes must go through tx. Called on a db that is already a
// transaction it nests (a savepoint), so repositories can use it freely and
// callers can still group several repository calls into one transaction.
// On SQLite the transaction starts with BEGIN IMMEDIATE (see Open), so it
// holds the write lock from the start.
func WithTx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return Translate(db.WithContext(ctx).Transaction(fn))
}

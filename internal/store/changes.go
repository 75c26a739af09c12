package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// nextVersion takes the next global resource version inside tx. The
// UPDATE holds the counter row's lock until tx ends, so versions commit in
// the order they are handed out: once a reader sees version N, every
// version below N is either visible or was rolled back. Every action write
// takes it before touching actions, so writers lock in one order.
func nextVersion(tx *gorm.DB) (int64, error) {
	var v int64
	err := tx.Raw("UPDATE resource_version SET value = value + 1 WHERE id = 1 RETURNING value").Scan(&v).Error
	if err != nil {
		return 0, fmt.Errorf("take resource version: %w", db.Translate(err))
	}
	if v == 0 {
		return 0, fmt.Errorf("take resource version: counter row missing: %w", errs.ErrPrecondition)
	}
	return v, nil
}

func appendChange(tx *gorm.DB, rv int64, op string, key ActionKey, at time.Time) error {
	c := Change{ResourceVersion: rv, Kind: KindAction, Op: op, Key: key, ObjectResourceVersion: rv, OccurredAt: at}
	if err := tx.Create(&c).Error; err != nil {
		return fmt.Errorf("append change %d: %w", rv, db.Translate(err))
	}
	return nil
}

// CurrentVersion is the latest committed resource version. A watcher takes
// it, reads its snapshot, then follows ChangesSince(it): changes that land
// in between are delivered twice at worst, never missed.
func (r *Actions) CurrentVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := r.db.WithContext(ctx).Raw("SELECT value FROM resource_version WHERE id = 1").Scan(&v).Error; err != nil {
		return 0, fmt.Errorf("read resource version: %w", db.Translate(err))
	}
	return v, nil
}

// ChangesSince returns up to limit changes with a resource version above
// after, oldest first.
func (r *Actions) ChangesSince(ctx context.Context, after int64, limit int) ([]Change, error) {
	limit = Page{Limit: limit}.limit()
	var out []Change
	err := r.db.WithContext(ctx).Where("resource_version > ?", after).
		Order("resource_version").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read change log: %w", db.Translate(err))
	}
	return out, nil
}

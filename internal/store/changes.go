package store

import (
	"context"
	"fmt"
	"time"

	"fmgr.dev/internal/db"
)

// appendChange records that key changed at resource version rv (taken
// from the batch, see batch.go: versions commit in the order they are
// handed out, so once a reader sees version N, every version below N is
// either visible or was rolled back).
func appendChange(ch *chain, rv int64, op string, key ActionKey, at time.Time) error {
	err := ch.add("", `INSERT INTO change_log (resource_version, kind, op, org, project, domain, run_name, name, object_resource_version, occurred_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, rv, KindAction, op, key.Org, key.Project, key.Domain, key.RunName, key.Name, rv, at)
	if err != nil {
		return fmt.Errorf("append change %d: %w", rv, err)
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

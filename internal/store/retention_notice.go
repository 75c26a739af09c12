package store

import (
	"context"
	"fmt"
	"time"

	"fmgr.dev/internal/db"
)

// NoticeFrom returns when the periodic collector first ran on this
// database, recording now when it never did (every manager on the
// database then agrees on the first).
func (r *Retention) NoticeFrom(ctx context.Context, now time.Time) (time.Time, error) {
	g := r.db.WithContext(ctx)
	if err := g.Exec(`INSERT INTO retention_notice (id, started_at) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, db.Time(now)).Error; err != nil {
		return time.Time{}, fmt.Errorf("record the retention notice: %w", db.Translate(err))
	}
	var row struct{ StartedAt time.Time }
	if err := g.Raw(`SELECT started_at FROM retention_notice WHERE id = 1`).Scan(&row).Error; err != nil {
		return time.Time{}, fmt.Errorf("read the retention notice: %w", db.Translate(err))
	}
	return row.StartedAt, nil
}

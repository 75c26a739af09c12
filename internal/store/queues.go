package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// queueActive selects a queue's actions that have not ended; it is spelled
// as the predicate of actions_queue_active_idx (migration 0008) so the
// planner uses that index.
var queueActive = "queue = ? AND queue <> '' AND " + activePredicate

// admitToQueue refuses one more action on queue when maxDepth (> 0) of its
// actions have not ended. It runs in the transaction that inserts the
// action, after a per-queue lock (PostgreSQL: a transaction-scoped
// advisory lock; SQLite: the write lock BEGIN IMMEDIATE already holds), so
// two concurrent submits never both take the last place, whichever replica
// serves them.
func admitToQueue(tx *gorm.DB, queue string, maxDepth int) error {
	if queue == "" || maxDepth <= 0 {
		return nil
	}
	if db.Dialect(tx) == db.Postgres {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtext(?))", "fmgr.queue:"+queue).Error; err != nil {
			return fmt.Errorf("lock queue %q: %w", queue, db.Translate(err))
		}
	}
	var n int64
	if err := tx.Model(&Action{}).Where(queueActive, queue).Count(&n).Error; err != nil {
		return fmt.Errorf("depth of queue %q: %w", queue, db.Translate(err))
	}
	if n >= int64(maxDepth) {
		return fmt.Errorf("queue %q is full: it holds %d actions that have not finished, its maxDepth is %d; submit again once some finish: %w",
			queue, n, maxDepth, errs.ErrTooLarge)
	}
	return nil
}

// QueueCounts are a queue's actions that have not ended.
type QueueCounts struct {
	// Depth counts them all: queued, waiting and running.
	Depth int64
	// InFlight counts those an attempt of which started (INITIALIZING or
	// RUNNING).
	InFlight int64
}

// QueueCounts returns the counts of every queue that has actions that
// have not ended (a queue missing from the map has none).
func (r *Actions) QueueCounts(ctx context.Context) (map[string]QueueCounts, error) {
	var rows []struct {
		Queue string
		Phase phase.Phase
		N     int64
	}
	err := r.q(ctx).Model(&Action{}).Select("queue, phase, COUNT(*) AS n").
		Where("queue <> '' AND " + activePredicate).Group("queue, phase").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("queue counts: %w", db.Translate(err))
	}
	out := map[string]QueueCounts{}
	for _, r := range rows {
		c := out[r.Queue]
		c.Depth += r.N
		if r.Phase == phase.Initializing || r.Phase == phase.Running {
			c.InFlight += r.N
		}
		out[r.Queue] = c
	}
	return out, nil
}

package store

import (
	"context"
	"fmt"
	"time"

	"fmgr.dev/internal/db"
)

// ChangesChannel is the PostgreSQL notification channel a commit of
// change_log rows notifies (migration 0009); its payload is the highest
// resource version the statement appended.
const ChangesChannel = "fmgr_changes"

// feedRow is one change_log row joined with its action's row. The change's
// columns carry a prefix so they do not collide with the action's.
type feedRow struct {
	ChangeVersion       int64     `gorm:"column:c_resource_version"`
	ChangeKind          string    `gorm:"column:c_kind"`
	ChangeOp            string    `gorm:"column:c_op"`
	ChangeOrg           string    `gorm:"column:c_org"`
	ChangeProject       string    `gorm:"column:c_project"`
	ChangeDomain        string    `gorm:"column:c_domain"`
	ChangeRunName       string    `gorm:"column:c_run_name"`
	ChangeName          string    `gorm:"column:c_name"`
	ChangeObjectVersion int64     `gorm:"column:c_object_resource_version"`
	ChangeOccurredAt    time.Time `gorm:"column:c_occurred_at"`
	Action              `gorm:"embedded"`
}

const feedQuery = `SELECT c.resource_version AS c_resource_version, c.kind AS c_kind, c.op AS c_op,
 c.org AS c_org, c.project AS c_project, c.domain AS c_domain, c.run_name AS c_run_name, c.name AS c_name,
 c.object_resource_version AS c_object_resource_version, c.occurred_at AS c_occurred_at, a.*
 FROM change_log c LEFT JOIN actions a
 ON a.org = c.org AND a.project = c.project AND a.domain = c.domain AND a.run_name = c.run_name AND a.name = c.name
 WHERE c.resource_version > ? ORDER BY c.resource_version LIMIT ?`

// ChangeFeed is ChangesSince with each change's action row (Change.Action),
// read in the same query, so that the hub's one read per dispatch serves
// every watcher: none reads the action again. The row is the action as it
// is when the feed is read, so it may be newer than the change (watchers
// keep the newest resource version they saw); it is nil when the action
// no longer exists.
func (r *Actions) ChangeFeed(ctx context.Context, after int64, limit int) ([]Change, error) {
	limit = Page{Limit: limit}.limit()
	var rows []feedRow
	if err := r.db.WithContext(ctx).Raw(feedQuery, after, limit).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read change log: %w", db.Translate(err))
	}
	out := make([]Change, len(rows))
	// Changes of one action in one batch share its row.
	byID := map[int64]*Action{}
	for i := range rows {
		f := &rows[i]
		c := Change{
			ResourceVersion: f.ChangeVersion, Kind: f.ChangeKind, Op: f.ChangeOp,
			Key:                   ActionKey{RunKey: RunKey{Org: f.ChangeOrg, Project: f.ChangeProject, Domain: f.ChangeDomain, RunName: f.ChangeRunName}, Name: f.ChangeName},
			ObjectResourceVersion: f.ChangeObjectVersion, OccurredAt: f.ChangeOccurredAt,
		}
		if f.Action.ID != 0 {
			if byID[f.Action.ID] == nil {
				a := f.Action
				byID[a.ID] = &a
			}
			c.Action = byID[f.Action.ID]
		}
		out[i] = c
	}
	return out, nil
}

// Listen calls notify for every notification of committed changes, on a
// connection of its own, until ctx ends (see db.Listen). On SQLite, where
// every writer is this process, it returns db.ErrNoNotifications at once.
func (r *Actions) Listen(ctx context.Context, connected func(), notify func(payload string)) error {
	return db.Listen(ctx, r.db, ChangesChannel, connected, notify)
}

package store

import (
	"context"
	"database/sql"
	"fmt"

	"fmgr.dev/internal/db"
)

// ChangesChannel is the PostgreSQL notification channel a commit of
// change_log rows notifies (migration 0009); its payload is the highest
// resource version the statement appended.
const ChangesChannel = "fmgr_changes"

var feedQuery = `SELECT c.resource_version, c.kind, c.op, c.org, c.project, c.domain, c.run_name, c.name,
 c.object_resource_version, c.occurred_at, ` + actionColumns("a") + `
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
	var out []Change
	// Changes of one action in one batch share its row.
	byID := map[int64]*Action{}
	var a Action
	dest := append([]any{
		intCol[int64]{nil}, textCol{nil}, textCol{nil}, textCol{nil}, textCol{nil}, textCol{nil},
		textCol{nil}, textCol{nil}, intCol[int64]{nil}, timeCol{nil},
	}, actionDest(&a)...)
	err := queryRows(r.db.WithContext(ctx), func(rows *sql.Rows) error {
		out = append(out, Change{})
		c := &out[len(out)-1]
		dest[0], dest[1], dest[2] = intCol[int64]{&c.ResourceVersion}, textCol{&c.Kind}, textCol{&c.Op}
		dest[3], dest[4], dest[5] = textCol{&c.Key.Org}, textCol{&c.Key.Project}, textCol{&c.Key.Domain}
		dest[6], dest[7] = textCol{&c.Key.RunName}, textCol{&c.Key.Name}
		dest[8], dest[9] = intCol[int64]{&c.ObjectResourceVersion}, timeCol{&c.OccurredAt}
		a = Action{}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if a.ID != 0 {
			if byID[a.ID] == nil {
				row := a
				byID[a.ID] = &row
			}
			c.Action = byID[a.ID]
		}
		return nil
	}, feedQuery, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read change log: %w", err)
	}
	return out, nil
}

// Listen calls notify for every notification of committed changes, on a
// connection of its own, until ctx ends (see db.Listen). On SQLite, where
// every writer is this process, it returns db.ErrNoNotifications at once.
func (r *Actions) Listen(ctx context.Context, connected func(), notify func(payload string)) error {
	return db.Listen(ctx, r.db, ChangesChannel, connected, notify)
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Retention is what the collector of ended runs (internal/retention) asks
// of the database: which runs ended when, deleting a run with every row it
// owns, pins, and whether stored data is still referenced.
type Retention struct {
	db *gorm.DB
	w  writes
}

// EndedRun is a run the collector may consider: its root ended.
type EndedRun struct {
	ID            int64
	RunKey        `gorm:"embedded"`
	EndedAt       time.Time
	RunOutputBase string
	InputURI      string `gorm:"column:input_uri"`
}

// EndedCursor continues EndedRuns after the last run it returned.
type EndedCursor struct {
	EndedAt time.Time
	ID      int64
}

// EndedRuns returns up to limit unpinned runs whose root ended before
// before, oldest end first, after the cursor (nil: from the start).
func (r *Retention) EndedRuns(ctx context.Context, before time.Time, after *EndedCursor, limit int) ([]EndedRun, error) {
	q := `SELECT a.id, a.org, a.project, a.domain, a.run_name, a.ended_at, a.run_output_base, a.input_uri
FROM actions a
WHERE a.parent_name IS NULL AND a.ended_at IS NOT NULL AND a.ended_at < ?`
	args := []any{db.Time(before)}
	if after != nil {
		q += ` AND (a.ended_at > ? OR (a.ended_at = ? AND a.id > ?))`
		args = append(args, db.Time(after.EndedAt), db.Time(after.EndedAt), after.ID)
	}
	q += ` AND NOT EXISTS (SELECT 1 FROM run_pins p
 WHERE p.org = a.org AND p.project = a.project AND p.domain = a.domain AND p.run_name = a.run_name)
ORDER BY a.ended_at, a.id LIMIT ?`
	args = append(args, limit)
	var out []EndedRun
	if err := r.db.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("list ended runs: %w", db.Translate(err))
	}
	return out, nil
}

// CachedOutputsUnder returns the output URIs of cache entries that lie
// under one of prefixes (the forms of a run's base URI): the outputs the
// cache keeps alive.
func (r *Retention) CachedOutputsUnder(ctx context.Context, prefixes []string) ([]string, error) {
	var out []string
	for _, prefix := range prefixes {
		prefix = strings.TrimRight(prefix, "/")
		// '0' follows '/': the range is every URI that starts with prefix/.
		var uris []string
		err := r.db.WithContext(ctx).Raw(`SELECT output_uri FROM cache_outputs WHERE output_uri >= ? AND output_uri < ?`,
			prefix+"/", prefix+"0").Scan(&uris).Error
		if err != nil {
			return nil, fmt.Errorf("cache entries under %s: %w", prefix, db.Translate(err))
		}
		out = append(out, uris...)
	}
	return out, nil
}

// DeletedRun is what DeleteRun removed.
type DeletedRun struct {
	Actions int64
	// Specs are the task specs no action or task version uses any more,
	// deleted with the run: the code bundles they name may be unreferenced.
	Specs [][]byte
}

// deleteChunk bounds the actions one transaction of DeleteRun deletes, so
// that deleting a run of a hundred thousand actions never holds the
// database (SQLite's one writer, a group commit batch) for long.
var deleteChunk = 500

// DeleteRun deletes a run that has ended and is not pinned, with its
// actions, attempts, events and trigger record, and the task specs nothing
// uses any more (its change log rows: CompactDeleted). A run that is
// pinned, or has an action that has not ended, is an
// errs.ErrPrecondition; a run that is gone is an errs.ErrNotFound.
//
// Its actions go deleteChunk at a time, newest first (children before
// their parents), each chunk in a transaction of its own that checks the
// run again; the root goes last, with the rest, so the run is listed until
// it is gone whole.
func (r *Retention) DeleteRun(ctx context.Context, key RunKey) (DeletedRun, error) {
	var out DeletedRun
	digests := map[string]bool{}
	for last := false; !last; {
		err := r.w.run(ctx, func(w *writeTx) error {
			n, ds, final, err := deleteRunChunk(w.tx, key, deleteChunk)
			if err != nil {
				return err
			}
			out.Actions += n
			for _, d := range ds {
				digests[d] = true
			}
			if final {
				specs, err := deleteUnusedSpecs(w.tx, digests)
				if err != nil {
					return fmt.Errorf("delete run %s: %w", key, err)
				}
				out.Specs = specs
			}
			last = final
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// deleteRunChunk checks that the run may go and deletes up to limit of its
// actions but the root, or, when no more than limit are left, all of them
// with its trigger record (final). It returns how many actions it deleted
// and their spec digests.
func deleteRunChunk(tx *gorm.DB, key RunKey, limit int) (deleted int64, digests []string, final bool, err error) {
	run := []any{key.Org, key.Project, key.Domain, key.RunName}
	const where = "org = ? AND project = ? AND domain = ? AND run_name = ?"
	var n struct{ Total, Active, Pinned int64 }
	err = tx.Raw(`SELECT
 (SELECT COUNT(*) FROM actions WHERE `+where+`) AS total,
 (SELECT COUNT(*) FROM actions WHERE `+where+` AND `+activePredicate+`) AS active,
 (SELECT COUNT(*) FROM run_pins WHERE `+where+`) AS pinned`, append(append(append([]any{}, run...), run...), run...)...).Scan(&n).Error
	if err != nil {
		return 0, nil, false, fmt.Errorf("delete run %s: %w", key, db.Translate(err))
	}
	switch {
	case n.Total == 0:
		return 0, nil, false, errs.NotFoundf("run %s", key)
	case n.Pinned > 0:
		return 0, nil, false, fmt.Errorf("run %s is pinned: %w", key, errs.ErrPrecondition)
	case n.Active > 0:
		return 0, nil, false, fmt.Errorf("run %s has %d actions that have not ended: %w", key, n.Active, errs.ErrPrecondition)
	}
	final = n.Total <= int64(limit)
	var rows []struct {
		ID         int64
		SpecDigest *string
	}
	q := `SELECT id, spec_digest FROM actions WHERE ` + where
	if !final {
		q += ` AND parent_name IS NOT NULL ORDER BY id DESC LIMIT ` + strconv.Itoa(limit)
	}
	if err := tx.Raw(q, run...).Scan(&rows).Error; err != nil {
		return 0, nil, false, fmt.Errorf("delete run %s: %w", key, db.Translate(err))
	}
	ids := make([]int64, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
		if row.SpecDigest != nil {
			digests = append(digests, *row.SpecDigest)
		}
	}
	// Attempts and events go with their actions (ON DELETE CASCADE), and
	// so do children of a deleted parent.
	res := tx.Exec(`DELETE FROM actions WHERE id IN ?`, ids)
	if res.Error != nil {
		return 0, nil, false, fmt.Errorf("delete run %s: %w", key, db.Translate(res.Error))
	}
	if final {
		if err := tx.Exec(`DELETE FROM trigger_runs WHERE `+where, run...).Error; err != nil {
			return 0, nil, false, fmt.Errorf("delete run %s: %w", key, db.Translate(err))
		}
	}
	return res.RowsAffected, digests, final, nil
}

// deleteUnusedSpecs deletes the specs among digests that no action and no
// task version uses, and returns them.
func deleteUnusedSpecs(tx *gorm.DB, digests map[string]bool) ([][]byte, error) {
	var out [][]byte
	for d := range digests {
		var spec []byte
		err := tx.Raw(`SELECT spec FROM task_specs s WHERE digest = ?
 AND NOT EXISTS (SELECT 1 FROM actions a WHERE a.spec_digest = s.digest)
 AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.spec_digest = s.digest)`, d).Row().Scan(&spec)
		if errors.Is(err, sql.ErrNoRows) {
			continue // still used
		}
		if err != nil {
			return nil, fmt.Errorf("spec %s: %w", d, db.Translate(err))
		}
		if err := tx.Exec(`DELETE FROM task_specs WHERE digest = ?`, d).Error; err != nil {
			return nil, fmt.Errorf("spec %s: %w", d, db.Translate(err))
		}
		out = append(out, spec)
	}
	return out, nil
}

// BundleReferenced reports whether any of uris (the forms of one code
// bundle's location) is named in a stored task spec, an app's spec or a
// trigger's spec. It reads every spec: it is asked once per bundle that
// lost its last run.
func (r *Retention) BundleReferenced(ctx context.Context, uris []string) (bool, error) {
	contains := "instr(%s, CAST(? AS BLOB)) > 0"
	if db.Dialect(r.db) == db.Postgres {
		contains = "position(convert_to(?, 'UTF8') in %s) > 0"
	}
	q := `SELECT
 (SELECT COUNT(*) FROM task_specs WHERE ` + fmt.Sprintf(contains, "spec") + `)
 + (SELECT COUNT(*) FROM apps WHERE ` + fmt.Sprintf(contains, "spec") + `)
 + (SELECT COUNT(*) FROM triggers WHERE ` + fmt.Sprintf(contains, "spec") + `)`
	return r.anyFound(ctx, q, uris, func(uri string) []any { return []any{uri, uri, uri} })
}

// RunInputsAmong returns which of uris are the inputs of some run (its
// root's input_uri), in one statement per 500 of them.
func (r *Retention) RunInputsAmong(ctx context.Context, uris []string) (map[string]bool, error) {
	found := map[string]bool{}
	for chunk := range slices.Chunk(uris, 500) {
		var got []string
		if err := r.db.WithContext(ctx).Raw(`SELECT DISTINCT input_uri FROM actions WHERE parent_name IS NULL AND input_uri IN ?`, chunk).
			Scan(&got).Error; err != nil {
			return nil, fmt.Errorf("runs' inputs: %w", db.Translate(err))
		}
		for _, u := range got {
			found[u] = true
		}
	}
	return found, nil
}

// TriggerSpecs returns every trigger's stored spec (the offloaded inputs
// a trigger names are in it).
func (r *Retention) TriggerSpecs(ctx context.Context) ([][]byte, error) {
	var specs [][]byte
	if err := r.db.WithContext(ctx).Raw(`SELECT spec FROM triggers`).Scan(&specs).Error; err != nil {
		return nil, fmt.Errorf("triggers' specs: %w", db.Translate(err))
	}
	return specs, nil
}

// anyFound runs the counting query q with the arguments args gives for
// each of uris, and reports whether one counted anything.
func (r *Retention) anyFound(ctx context.Context, q string, uris []string, args func(string) []any) (bool, error) {
	for _, uri := range uris {
		uri = strings.TrimRight(uri, "/")
		var found int64
		if err := r.db.WithContext(ctx).Raw(q, args(uri)...).Scan(&found).Error; err != nil {
			return false, fmt.Errorf("references of %s: %w", uri, db.Translate(err))
		}
		if found > 0 {
			return true, nil
		}
	}
	return false, nil
}

// Pin keeps a run from being collected, whatever its age.
func (r *Retention) Pin(ctx context.Context, key RunKey, by, reason string) error {
	g := r.db.WithContext(ctx)
	var n int64
	if err := g.Raw(`SELECT COUNT(*) FROM actions WHERE org = ? AND project = ? AND domain = ? AND run_name = ? AND parent_name IS NULL`,
		key.Org, key.Project, key.Domain, key.RunName).Scan(&n).Error; err != nil {
		return fmt.Errorf("pin run %s: %w", key, db.Translate(err))
	}
	if n == 0 {
		return errs.NotFoundf("run %s", key)
	}
	err := g.Exec(`INSERT INTO run_pins (org, project, domain, run_name, pinned_by, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (org, project, domain, run_name) DO UPDATE SET reason = excluded.reason`,
		key.Org, key.Project, key.Domain, key.RunName, by, reason, db.Now()).Error
	if err != nil {
		return fmt.Errorf("pin run %s: %w", key, db.Translate(err))
	}
	return nil
}

// Unpin lets a pinned run be collected again; a run that is not pinned is
// an errs.ErrNotFound.
func (r *Retention) Unpin(ctx context.Context, key RunKey) error {
	res := r.db.WithContext(ctx).Exec(`DELETE FROM run_pins WHERE org = ? AND project = ? AND domain = ? AND run_name = ?`,
		key.Org, key.Project, key.Domain, key.RunName)
	if res.Error != nil {
		return fmt.Errorf("unpin run %s: %w", key, db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return errs.NotFoundf("no pin on run %s", key)
	}
	return nil
}

// Pin is a pinned run.
type Pin struct {
	RunKey    `gorm:"embedded"`
	PinnedBy  string
	Reason    string
	CreatedAt time.Time
}

// Pins lists the pinned runs, oldest pin first.
func (r *Retention) Pins(ctx context.Context) ([]Pin, error) {
	var out []Pin
	err := r.db.WithContext(ctx).Raw(`SELECT org, project, domain, run_name, pinned_by, reason, created_at FROM run_pins ORDER BY created_at, org, project, domain, run_name`).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", db.Translate(err))
	}
	return out, nil
}

// Defer records that uri may be deleted once notBefore passed, if nothing
// references it then (code bundles: see migration 0015).
func (r *Retention) Defer(ctx context.Context, uri string, notBefore time.Time) error {
	err := r.db.WithContext(ctx).Exec(`INSERT INTO gc_pending (uri, not_before) VALUES (?, ?)
ON CONFLICT (uri) DO UPDATE SET not_before = excluded.not_before`, uri, db.Time(notBefore)).Error
	if err != nil {
		return fmt.Errorf("defer deleting %s: %w", uri, db.Translate(err))
	}
	return nil
}

// Due returns up to limit deferred URIs whose time came by now.
func (r *Retention) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var out []string
	err := r.db.WithContext(ctx).Raw(`SELECT uri FROM gc_pending WHERE not_before <= ? ORDER BY not_before, uri LIMIT ?`, db.Time(now), limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("deferred deletions: %w", db.Translate(err))
	}
	return out, nil
}

// Done forgets a deferred URI (deleted, or found referenced again).
func (r *Retention) Done(ctx context.Context, uri string) error {
	if err := r.db.WithContext(ctx).Exec(`DELETE FROM gc_pending WHERE uri = ?`, uri).Error; err != nil {
		return fmt.Errorf("forget %s: %w", uri, db.Translate(err))
	}
	return nil
}

// CompactDeleted deletes the change log rows with a resource version in
// (after, after+span] whose action no longer exists (a collected run's),
// and returns how many it deleted. The range walks the primary key, so
// each call is one bounded statement. Watches that replay the log skip
// such rows anyway (store.Change.Action is nil).
func (r *Retention) CompactDeleted(ctx context.Context, after, span int64) (int64, error) {
	res := r.db.WithContext(ctx).Exec(`DELETE FROM change_log WHERE resource_version > ? AND resource_version <= ?
 AND NOT EXISTS (SELECT 1 FROM actions a WHERE a.org = change_log.org AND a.project = change_log.project
 AND a.domain = change_log.domain AND a.run_name = change_log.run_name AND a.name = change_log.name)`, after, after+span)
	if res.Error != nil {
		return 0, fmt.Errorf("compact the change log: %w", db.Translate(res.Error))
	}
	return res.RowsAffected, nil
}

// OldestChange is the lowest resource version in the change log (the
// current one plus one when it is empty).
func (r *Retention) OldestChange(ctx context.Context) (int64, error) {
	return (&Actions{db: r.db}).OldestChange(ctx)
}

// CurrentVersion is the latest committed resource version.
func (r *Retention) CurrentVersion(ctx context.Context) (int64, error) {
	return (&Actions{db: r.db}).CurrentVersion(ctx)
}

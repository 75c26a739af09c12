package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
)

// RunFilter narrows ListRuns. Org is always matched; every other empty
// field matches anything.
type RunFilter struct {
	Org         string
	Project     string
	Domain      string
	Phases      []phase.Phase // any of these
	TaskName    string
	TaskVersion string
	// TaskNameContains are substrings the run's task name must contain.
	TaskNameContains []Substring
	// Paused keeps the runs with an action waiting in PAUSED (a condition
	// waiting for its signal).
	Paused    bool
	CreatedBy string
	// TriggerName keeps the runs the trigger of that name (of the run's
	// task: set TaskName too) made.
	TriggerName   string
	CreatedAfter  time.Time // inclusive
	CreatedBefore time.Time // exclusive
	Ascending     bool      // oldest first; the default is newest first
}

// ListRuns returns root actions, ordered by creation time.
func (r *Actions) ListRuns(ctx context.Context, f RunFilter, page Page) ([]Action, string, error) {
	query := "runs:desc"
	if f.Ascending {
		query = "runs:asc"
	}
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	// The literal predicate matches the partial indexes on root actions.
	q := r.q(ctx).Where("parent_name IS NULL").Where("org = ?", f.Org)
	q = whereSet(q, "project", f.Project)
	q = whereSet(q, "domain", f.Domain)
	q = whereSet(q, "task_name", f.TaskName)
	q = whereSet(q, "task_version", f.TaskVersion)
	q = whereSet(q, "created_by", f.CreatedBy)
	if len(f.Phases) > 0 {
		q = q.Where("phase IN ?", f.Phases)
	}
	for _, sub := range f.TaskNameContains {
		q = whereContains(q, "task_name", sub)
	}
	if f.Paused {
		// A probe of the partial index of paused actions per run root.
		q = q.Where("EXISTS (SELECT 1 FROM actions p WHERE p.phase = ? AND p.org = actions.org AND "+
			"p.project = actions.project AND p.domain = actions.domain AND p.run_name = actions.run_name)", phase.Paused)
	}
	if f.TriggerName != "" {
		q = whereMadeBy(q, f.TriggerName)
	}
	if !f.CreatedAfter.IsZero() {
		q = q.Where("created_at >= ?", db.Time(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		q = q.Where("created_at < ?", db.Time(f.CreatedBefore))
	}
	return listByTime(q, query, c, !f.Ascending, page.limit())
}

// ActionFilter narrows the actions of a run; the zero value lists them all.
type ActionFilter struct {
	Parent        string        // only the direct children of this action
	Phases        []phase.Phase // any of these
	Types         []ActionType  // any of these
	CreatedAfter  time.Time     // inclusive
	CreatedBefore time.Time     // exclusive
	UpdatedAfter  time.Time     // inclusive
	UpdatedBefore time.Time     // exclusive
}

// ListActions returns the actions of a run (the root included) that f
// selects, oldest first. The run's (and a parent's) actions are found by
// index; the other conditions filter those rows.
func (r *Actions) ListActions(ctx context.Context, run RunKey, f ActionFilter, page Page) ([]Action, string, error) {
	query := "actions"
	if f.Parent != "" {
		query = "children" // a page of one listing is no token for the other
	}
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := r.q(ctx).Where("org = ? AND project = ? AND domain = ? AND run_name = ?",
		run.Org, run.Project, run.Domain, run.RunName)
	q = whereSet(q, "parent_name", f.Parent)
	if len(f.Phases) > 0 {
		q = q.Where("phase IN ?", f.Phases)
	}
	if len(f.Types) > 0 {
		q = q.Where("action_type IN ?", f.Types)
	}
	for _, b := range []struct {
		cond string
		at   time.Time
	}{
		{"created_at >= ?", f.CreatedAfter}, {"created_at < ?", f.CreatedBefore},
		{"updated_at >= ?", f.UpdatedAfter}, {"updated_at < ?", f.UpdatedBefore},
	} {
		if !b.at.IsZero() {
			q = q.Where(b.cond, db.Time(b.at))
		}
	}
	return listByTime(q, query, c, false, page.limit())
}

// EachOfRun calls fn with every action of run, oldest first, read page by
// page in one snapshot: however many pages the run takes, the rows are the
// run as it was at one moment (a watch's first message must not show a
// child's later state under its parent's earlier one). fn runs inside the
// read: it should only collect.
func (r *Actions) EachOfRun(ctx context.Context, run RunKey, fn func(*Action) error) error {
	return r.readSnapshot(ctx, func(tx *Actions) error {
		return EachAction(MaxPageSize, func(p Page) ([]Action, string, error) {
			return tx.ListActions(ctx, run, ActionFilter{}, p)
		}, fn)
	})
}

// ListChildren returns the direct children of parent, oldest first.
func (r *Actions) ListChildren(ctx context.Context, parent ActionKey, page Page) ([]Action, string, error) {
	return r.ListActions(ctx, parent.RunKey, ActionFilter{Parent: parent.Name}, page)
}

// ListNonTerminal returns every action not yet in a terminal phase, across
// all projects, in creation order: what an executor must pick up again
// after a restart.
func (r *Actions) ListNonTerminal(ctx context.Context, page Page) ([]Action, string, error) {
	const query = "active"
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := r.q(ctx).Where(activePredicate)
	if c != nil {
		q = q.Where("id > ?", c.ID)
	}
	var rows []Action
	limit := page.limit()
	if err := q.Order("id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list active actions: %w", db.Translate(err))
	}
	rows, next := cut(rows, limit, func(a Action) cursor { return cursor{Query: query, ID: a.ID} })
	return rows, next, nil
}

// listByTime pages q by (created_at, id), which is unique, so every row is
// returned exactly once however many rows are inserted between pages.
func listByTime(q *gorm.DB, query string, c *cursor, desc bool, limit int) ([]Action, string, error) {
	order := "created_at, id"
	if desc {
		order = "created_at DESC, id DESC"
	}
	if c != nil {
		if desc {
			q = q.Where("(created_at, id) < (?, ?)", c.time(), c.ID)
		} else {
			q = q.Where("(created_at, id) > (?, ?)", c.time(), c.ID)
		}
	}
	var rows []Action
	if err := q.Order(order).Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list actions: %w", db.Translate(err))
	}
	rows, next := cut(rows, limit, func(a Action) cursor {
		return cursor{Query: query, Time: a.CreatedAt.UnixMicro(), ID: a.ID}
	})
	return rows, next, nil
}

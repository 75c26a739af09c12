package store

import (
	"context"
	"fmt"
	"strings"

	"fmgr.dev/internal/db"
)

// Every action, for the Kubernetes-style API: its lists cross runs,
// projects and domains, page by page, and say at which resource version
// they were read so that a watch can take over from there.

// AllFilter narrows ListAll to the actions whose columns equal the fields
// set; empty fields match anything.
type AllFilter struct {
	Org, Project, Domain, RunName, Name string
	// ExactOrg matches Org even when it is empty (the default org), so
	// that a lookup by the whole key uses the actions' unique index.
	ExactOrg bool
	// Roots keeps only the runs' root actions; Children only the others.
	Roots, Children bool
}

// AllPage is one page of ListAll.
type AllPage struct {
	Actions []Action
	// ResourceVersion is the change log's version when the page was read:
	// every row is at least as new as it says.
	ResourceVersion int64
	// More says rows follow the last one returned.
	More bool
}

// ListAll returns up to limit actions that f selects with an id above
// after, by id (which is unique and never reused, so paging by it returns
// every row at most once however rows change between pages), read in one
// snapshot together with the current resource version.
func (r *Actions) ListAll(ctx context.Context, f AllFilter, after int64, limit int) (AllPage, error) {
	limit = Page{Limit: limit}.limit()
	where := []string{"id > ?"}
	args := []any{after}
	if f.ExactOrg && f.Org == "" {
		where = append(where, "org = ?")
		args = append(args, "")
	}
	for _, c := range []struct{ col, v string }{
		{"org", f.Org}, {"project", f.Project}, {"domain", f.Domain}, {"run_name", f.RunName}, {"name", f.Name},
	} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	switch {
	case f.Roots && !f.Children:
		where = append(where, "parent_name IS NULL")
	case f.Children && !f.Roots:
		where = append(where, "parent_name IS NOT NULL")
	}
	query := "SELECT " + actionColumns("") + " FROM actions WHERE " + strings.Join(where, " AND ") + " ORDER BY id LIMIT ?"
	args = append(args, limit+1)
	var page AllPage
	err := r.readSnapshot(ctx, func(tx *Actions) error {
		if err := tx.db.Raw("SELECT value FROM resource_version WHERE id = 1").Scan(&page.ResourceVersion).Error; err != nil {
			return fmt.Errorf("read resource version: %w", db.Translate(err))
		}
		rows, err := scanActions(tx.db, query, args...)
		if err != nil {
			return fmt.Errorf("list every action: %w", err)
		}
		page.Actions = rows
		return nil
	})
	if err != nil {
		return AllPage{}, err
	}
	if len(page.Actions) > limit {
		page.Actions, page.More = page.Actions[:limit], true
	}
	return page, nil
}

// OldestChange is the lowest resource version the change log still holds,
// or the current version plus one when it holds none: a reader that has
// seen version v can follow the log without a gap while v+1 >= OldestChange.
func (r *Actions) OldestChange(ctx context.Context) (int64, error) {
	var v struct {
		Oldest  *int64
		Current int64
	}
	err := r.db.WithContext(ctx).Raw(`SELECT (SELECT MIN(resource_version) FROM change_log) AS oldest,
 (SELECT value FROM resource_version WHERE id = 1) AS current`).Scan(&v).Error
	if err != nil {
		return 0, fmt.Errorf("read the change log's oldest version: %w", db.Translate(err))
	}
	if v.Oldest == nil {
		return v.Current + 1, nil
	}
	return *v.Oldest, nil
}

// CompactChanges deletes the change log's rows below version below and
// returns how many it deleted. Watchers that have not read past them must
// start again from a fresh list.
func (r *Actions) CompactChanges(ctx context.Context, below int64) (int64, error) {
	res := r.db.WithContext(ctx).Exec("DELETE FROM change_log WHERE resource_version < ?", below)
	if res.Error != nil {
		return 0, fmt.Errorf("compact the change log: %w", db.Translate(res.Error))
	}
	return res.RowsAffected, nil
}

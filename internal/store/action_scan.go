package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
)

// Reading action rows without gorm's reflection. The executor, the writes
// and the hub's change feed read an action for nearly every change: gorm
// matched each column to a field by name and converted it through
// reflection (a seventh of the manager's CPU in the no-op bench). These
// reads list their columns and scan each straight into its field instead;
// every other query keeps gorm.

// actionColumnNames are the actions columns scanAction reads, in the order
// of actionRow.dest.
var actionColumnNames = []string{
	"id", "org", "project", "domain", "run_name", "name", "parent_name", "action_type",
	"task_org", "task_project", "task_domain", "task_name", "task_version", "task_type",
	"short_name", "environment_name", "spec_digest", "phase", "attempts", "input_uri",
	"run_output_base", "action_group", "run_spec", "error_info", "abort_info",
	"abort_requested_at", "cache_status", "cache_key", "queue", "created_by", "created_at",
	"updated_at", "started_at", "ended_at", "resource_version", "recovered_from",
	"condition_spec", "signal_info",
}

// actionColumns is the select list of an action's columns, each qualified
// by table ("actions", an alias) when it is not "".
func actionColumns(table string) string {
	if table == "" {
		return strings.Join(actionColumnNames, ", ")
	}
	return table + "." + strings.Join(actionColumnNames, ", "+table+".")
}

// actionDest returns where each of actionColumnNames goes in a. Every
// destination takes NULL (as the zero value, nil for pointers), so a row of
// a LEFT JOIN without its action scans too (ID stays 0).
func actionDest(a *Action) []any {
	return []any{
		intCol[int64]{&a.ID}, textCol{&a.Org}, textCol{&a.Project}, textCol{&a.Domain},
		textCol{&a.RunName}, textCol{&a.Name}, optTextCol{&a.ParentName}, intCol[ActionType]{&a.ActionType},
		textCol{&a.Task.Org}, textCol{&a.Task.Project}, textCol{&a.Task.Domain}, textCol{&a.Task.Name},
		textCol{&a.Task.Version}, textCol{&a.TaskType}, textCol{&a.ShortName}, textCol{&a.EnvironmentName},
		textCol{&a.SpecDigest}, intCol[phase.Phase]{&a.Phase}, intCol[int32]{&a.Attempts}, textCol{&a.InputURI},
		textCol{&a.RunOutputBase}, textCol{&a.Group}, bytesCol{&a.RunSpec}, bytesCol{&a.ErrorInfo},
		bytesCol{&a.AbortInfo}, optTimeCol{&a.AbortRequestedAt}, intCol[int32]{&a.CacheStatus},
		textCol{&a.CacheKey}, textCol{&a.Queue}, textCol{&a.CreatedBy}, timeCol{&a.CreatedAt},
		timeCol{&a.UpdatedAt}, optTimeCol{&a.StartedAt}, optTimeCol{&a.EndedAt},
		intCol[int64]{&a.ResourceVersion}, textCol{&a.RecoveredFrom},
		bytesCol{&a.ConditionSpec}, bytesCol{&a.SignalInfo},
	}
}

// queryRows runs a query (counted like every statement gorm sends) and
// calls each for every row; each scans the row with the *sql.Rows given.
func queryRows(tx *gorm.DB, each func(*sql.Rows) error, query string, args ...any) error {
	rows, err := tx.Raw(query, args...).Rows()
	if err != nil {
		return db.Translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return db.Translate(err)
	}
	return nil
}

// scanActions reads the actions query selects (its select list must be
// actionColumns, nothing after it).
func scanActions(tx *gorm.DB, query string, args ...any) ([]Action, error) {
	var out []Action
	err := queryRows(tx, func(rows *sql.Rows) error {
		out = append(out, Action{})
		return rows.Scan(actionDest(&out[len(out)-1])...)
	}, query, args...)
	return out, err
}

// The column destinations. Drivers hand over int64, string, []byte and
// time.Time (the PostgreSQL driver, and SQLite's for DATETIME columns);
// []byte may be the driver's buffer, so it is copied.

type textCol struct{ p *string }

func (c textCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.p = ""
	case string:
		*c.p = v
	case []byte:
		*c.p = string(v)
	default:
		return fmt.Errorf("store: text column holds %T", v)
	}
	return nil
}

type optTextCol struct{ p **string }

func (c optTextCol) Scan(v any) error {
	if v == nil {
		*c.p = nil
		return nil
	}
	var s string
	if err := (textCol{&s}).Scan(v); err != nil {
		return err
	}
	*c.p = &s
	return nil
}

type intCol[T ~int32 | ~int64] struct{ p *T }

func (c intCol[T]) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.p = 0
	case int64:
		*c.p = T(v)
	case int32:
		*c.p = T(v)
	default:
		return fmt.Errorf("store: integer column holds %T", v)
	}
	return nil
}

type bytesCol struct{ p *[]byte }

func (c bytesCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.p = nil
	case []byte:
		*c.p = append([]byte{}, v...)
	case string:
		*c.p = []byte(v)
	default:
		return fmt.Errorf("store: bytes column holds %T", v)
	}
	return nil
}

type timeCol struct{ p *time.Time }

func (c timeCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.p = time.Time{}
	case time.Time:
		*c.p = v
	default:
		return fmt.Errorf("store: time column holds %T", v)
	}
	return nil
}

type optTimeCol struct{ p **time.Time }

func (c optTimeCol) Scan(v any) error {
	if v == nil {
		*c.p = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(v); err != nil {
		return err
	}
	*c.p = &t
	return nil
}

// ParentState is what an executor needs of an action's parent: whether it
// ended or is being aborted.
type ParentState struct {
	Name             string
	Phase            phase.Phase
	AbortRequestedAt *time.Time
}

var getWithParentQuery = "SELECT " + actionColumns("a") + `, p.name, p.phase, p.abort_requested_at
FROM actions a LEFT JOIN actions p
 ON p.org = a.org AND p.project = a.project AND p.domain = a.domain AND p.run_name = a.run_name AND p.name = a.parent_name
WHERE a.org = ? AND a.project = ? AND a.domain = ? AND a.run_name = ? AND a.name = ?`

// GetWithParent is Get with the state of the action's parent, in one
// query: the executor looks at both whenever it considers starting a
// child. The parent is nil for a root (or a parent that is gone).
func (r *Actions) GetWithParent(ctx context.Context, key ActionKey) (*Action, *ParentState, error) {
	var a *Action
	var p ParentState
	err := queryRows(r.q(ctx), func(rows *sql.Rows) error {
		a = &Action{}
		return rows.Scan(append(actionDest(a), textCol{&p.Name}, intCol[phase.Phase]{&p.Phase}, optTimeCol{&p.AbortRequestedAt})...)
	}, getWithParentQuery, key.Org, key.Project, key.Domain, key.RunName, key.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("action %s: %w", key, err)
	}
	if a == nil {
		return nil, nil, fmt.Errorf("action %s: %w", key, errs.ErrNotFound)
	}
	if p.Name == "" {
		return a, nil, nil
	}
	return a, &p, nil
}

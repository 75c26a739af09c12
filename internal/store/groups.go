package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
)

// Task groups are a project's runs grouped by the task they ran
// (WatchGroups). Every figure is aggregated by the database over the
// partial index of root actions by task (actions_runs_task_idx, migration
// 0002): no run row is loaded to compute them.

// GroupFilter selects the runs that are grouped: the root actions of one
// project and domain created in [CreatedAfter, CreatedBefore).
type GroupFilter struct {
	Org, Project, Domain string
	CreatedAfter         time.Time // inclusive; zero: no bound
	CreatedBefore        time.Time // exclusive; zero: no bound
	Ascending            bool      // oldest latest run first; the default is newest first
}

// RecentRun is one of a group's newest runs.
type RecentRun struct {
	RunName string
	Phase   phase.Phase
}

// TaskGroup is the aggregate of one task's runs.
type TaskGroup struct {
	TaskName        string
	EnvironmentName string
	ShortName       string
	Total           int64
	LatestRun       time.Time
	LatestFinished  *time.Time
	// Mean seconds from creation to the end (of ended runs) and to first
	// running (of runs that started); NaN-free: 0 when there is none.
	AvgDurationSeconds  float64
	AvgToRunningSeconds float64
	PhaseCounts         map[phase.Phase]int64
	Recent              []RecentRun // newest first, at most RecentRuns
	CreatedBy           []string    // distinct subjects, at most CreatorsShown
	// FailureErrors are the stored errors (serialized, as in
	// Action.ErrorInfo) of the group's failed and timed-out runs, for the
	// caller to count by kind.
	FailureErrors [][]byte
}

// How much of each group is shown.
const (
	RecentRuns    = 5
	CreatorsShown = 10
)

const groupsQuery = "groups"

// ListTaskGroups returns one page of f's task groups, ordered by their
// latest run's creation time (then task name).
func (r *Actions) ListTaskGroups(ctx context.Context, f GroupFilter, page Page) ([]TaskGroup, string, error) {
	query := groupsQuery + ":desc"
	if f.Ascending {
		query = groupsQuery + ":asc"
	}
	c, err := decodeCursor(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	limit := page.limit()
	var groups []TaskGroup
	var next string
	err = r.readSnapshot(ctx, func(r *Actions) error {
		all, err := r.taskGroups(ctx, f, nil, c, limit+1)
		if err != nil {
			return err
		}
		groups, next = cut(all, limit, func(g TaskGroup) cursor {
			return cursor{Query: query, Time: g.LatestRun.UnixMicro(), Str: g.TaskName}
		})
		return r.fillGroups(ctx, f, groups)
	})
	if err != nil {
		return nil, "", err
	}
	return groups, next, nil
}

// TaskGroup returns the group of one task's runs in f; ok is false when f
// selects none of its runs.
func (r *Actions) TaskGroup(ctx context.Context, f GroupFilter, taskName string) (TaskGroup, bool, error) {
	var groups []TaskGroup
	err := r.readSnapshot(ctx, func(r *Actions) error {
		var err error
		if groups, err = r.taskGroups(ctx, f, &taskName, nil, 1); err != nil {
			return err
		}
		return r.fillGroups(ctx, f, groups)
	})
	if err != nil || len(groups) == 0 {
		return TaskGroup{}, false, err
	}
	return groups[0], true, nil
}

// readSnapshot runs fn's reads on one snapshot of the database, so that a
// group's several statements agree with each other while runs change: a
// read-only REPEATABLE READ transaction on PostgreSQL, a deferred one on
// SQLite (whose WAL readers keep the snapshot of their first read). Read
// only on SQLite too: that is what makes it deferred, where every other
// transaction begins IMMEDIATE and would hold the write lock while it reads.
func (r *Actions) readSnapshot(ctx context.Context, fn func(*Actions) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if db.Dialect(r.db) == db.Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(&Actions{db: tx})
	}, opts)
	return db.Translate(err) // fn's errors say what they read; begin and commit are the rest
}

// groupRuns is the root actions of f (of one task if task is set).
func (r *Actions) groupRuns(ctx context.Context, f GroupFilter, tasks []string) *gorm.DB {
	q := r.q(ctx).Table("actions").
		Where("parent_name IS NULL").
		Where("org = ? AND project = ? AND domain = ?", f.Org, f.Project, f.Domain)
	if len(tasks) == 1 {
		q = q.Where("task_name = ?", tasks[0])
	} else if len(tasks) > 1 {
		q = q.Where("task_name IN ?", tasks)
	}
	if !f.CreatedAfter.IsZero() {
		q = q.Where("created_at >= ?", db.Time(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		q = q.Where("created_at < ?", db.Time(f.CreatedBefore))
	}
	return q
}

// secondsBetween is the dialect's expression for to - from in seconds.
func secondsBetween(g *gorm.DB, from, to string) string {
	if db.Dialect(g) == db.Postgres {
		return "EXTRACT(EPOCH FROM (" + to + " - " + from + "))"
	}
	return "((" + sqliteJulian(to) + " - " + sqliteJulian(from) + ") * 86400.0)"
}

// sqliteJulian reads a time column the SQLite driver wrote (Go's
// "2006-01-02 15:04:05.999999999 -0700 MST") as a Julian day: julianday()
// takes the date and time before the zone, which is always UTC here (the
// store writes every time through db.Time or db.Now).
func sqliteJulian(col string) string {
	return "julianday(substr(" + col + ", 1, 10 + instr(substr(" + col + ", 12), ' ')))"
}

// taskGroups aggregates the groups themselves, after the cursor c.
func (r *Actions) taskGroups(ctx context.Context, f GroupFilter, task *string, c *cursor, limit int) ([]TaskGroup, error) {
	var tasks []string
	if task != nil {
		tasks = []string{*task}
	}
	q := r.groupRuns(ctx, f, tasks)
	sel := fmt.Sprintf("task_name, MAX(environment_name) AS env, MAX(short_name) AS short, COUNT(*) AS total, "+
		"MAX(created_at) AS latest_run, MAX(ended_at) AS latest_finished, "+
		"AVG(CASE WHEN ended_at IS NOT NULL THEN %s END) AS avg_duration, "+
		"AVG(CASE WHEN started_at IS NOT NULL THEN %s END) AS avg_to_running",
		secondsBetween(q, "created_at", "ended_at"), secondsBetween(q, "created_at", "started_at"))
	q = q.Select(sel).Group("task_name")
	order := "latest_run DESC, task_name DESC"
	if f.Ascending {
		order = "latest_run, task_name"
	}
	if c != nil {
		op := "<"
		if f.Ascending {
			op = ">"
		}
		q = q.Having("(MAX(created_at), task_name) "+op+" (?, ?)", c.time(), c.Str)
	}
	rows, err := q.Order(order).Limit(limit).Rows()
	if err != nil {
		return nil, fmt.Errorf("task groups: %w", db.Translate(err))
	}
	defer rows.Close()
	var out []TaskGroup
	for rows.Next() {
		var g TaskGroup
		var latest, finished any
		var avgDuration, avgToRunning *float64
		if err := rows.Scan(&g.TaskName, &g.EnvironmentName, &g.ShortName, &g.Total, &latest, &finished, &avgDuration, &avgToRunning); err != nil {
			return nil, fmt.Errorf("task groups: %w", db.Translate(err))
		}
		if g.LatestRun, err = aggregateTime(latest); err != nil {
			return nil, err
		}
		if finished != nil {
			t, err := aggregateTime(finished)
			if err != nil {
				return nil, err
			}
			g.LatestFinished = &t
		}
		if avgDuration != nil {
			g.AvgDurationSeconds = *avgDuration
		}
		if avgToRunning != nil {
			g.AvgToRunningSeconds = *avgToRunning
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("task groups: %w", db.Translate(err))
	}
	return out, nil
}

// aggregateTime reads MAX() of a time column: PostgreSQL returns a time,
// SQLite the stored text (an aggregate has no declared type to convert by).
func aggregateTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case string:
		return parseStoredTime(t)
	case []byte:
		return parseStoredTime(string(t))
	}
	return time.Time{}, fmt.Errorf("task groups: unexpected time value %T", v)
}

// storedTimeLayouts are the forms SQLite's driver writes times in.
var storedTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999 -0700 MST",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	time.RFC3339Nano,
}

func parseStoredTime(s string) (time.Time, error) {
	for _, l := range storedTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("task groups: unreadable time %q", s)
}

// fillGroups adds what each group needs besides its aggregates: phase
// counts, recent runs, creators and failure errors, each one statement for
// the whole page (recent runs one indexed statement per group).
func (r *Actions) fillGroups(ctx context.Context, f GroupFilter, groups []TaskGroup) error {
	if len(groups) == 0 {
		return nil
	}
	names := make([]string, len(groups))
	byName := make(map[string]*TaskGroup, len(groups))
	for i := range groups {
		names[i] = groups[i].TaskName
		byName[names[i]] = &groups[i]
		groups[i].PhaseCounts = map[phase.Phase]int64{}
	}
	var counts []struct {
		TaskName string
		Phase    phase.Phase
		N        int64
	}
	if err := r.groupRuns(ctx, f, names).Select("task_name, phase, COUNT(*) AS n").
		Group("task_name, phase").Scan(&counts).Error; err != nil {
		return fmt.Errorf("task group phases: %w", db.Translate(err))
	}
	for _, c := range counts {
		byName[c.TaskName].PhaseCounts[c.Phase] = c.N
	}
	var creators []struct{ TaskName, CreatedBy string }
	if err := r.groupRuns(ctx, f, names).Select("task_name, created_by").
		Group("task_name, created_by").Order("task_name, created_by").Scan(&creators).Error; err != nil {
		return fmt.Errorf("task group creators: %w", db.Translate(err))
	}
	for _, c := range creators {
		g := byName[c.TaskName]
		if c.CreatedBy != "" && len(g.CreatedBy) < CreatorsShown {
			g.CreatedBy = append(g.CreatedBy, c.CreatedBy)
		}
	}
	var failures []struct {
		TaskName  string
		ErrorInfo []byte
	}
	failed := []phase.Phase{phase.Failed, phase.TimedOut}
	if err := r.groupRuns(ctx, f, names).Select("task_name, error_info").
		Where("phase IN ? AND error_info IS NOT NULL", failed).Scan(&failures).Error; err != nil {
		return fmt.Errorf("task group errors: %w", db.Translate(err))
	}
	for _, e := range failures {
		g := byName[e.TaskName]
		g.FailureErrors = append(g.FailureErrors, e.ErrorInfo)
	}
	for i := range groups {
		var recent []struct {
			RunName string
			Phase   phase.Phase
		}
		if err := r.groupRuns(ctx, f, names[i:i+1]).Select("run_name, phase").
			Order("created_at DESC, id DESC").Limit(RecentRuns).Scan(&recent).Error; err != nil {
			return fmt.Errorf("task group recent runs: %w", db.Translate(err))
		}
		for _, rr := range recent {
			groups[i].Recent = append(groups[i].Recent, RecentRun{RunName: rr.RunName, Phase: rr.Phase})
		}
	}
	return nil
}

package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// statements records the SQL gorm runs, with its arguments inlined.
type statements struct {
	logger.Interface
	mu  sync.Mutex
	sql []string
}

func (s *statements) LogMode(logger.LogLevel) logger.Interface { return s }

func (s *statements) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	s.mu.Lock()
	s.sql = append(s.sql, sql)
	s.mu.Unlock()
}

func (s *statements) last(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sql) == 0 {
		t.Fatal("no statement ran")
	}
	return s.sql[len(s.sql)-1]
}

// ListRuns with the console's filters reads the partial indexes of root
// actions, on both databases: the plan of the very statement the store
// runs names one of them and sorts nothing (the index gives the order),
// for the first page and for a later one.
func TestListRunsUsesAnIndex(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for i := 0; i < 30; i++ {
			if _, err := s.Actions.CreateRun(ctx, newRun(store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%02d", i)})); err != nil {
				t.Fatal(err)
			}
		}
		rec := &statements{Interface: logger.Discard}
		traced := store.New(g.Session(&gorm.Session{Logger: rec}))
		pg := db.Dialect(g) == db.Postgres
		base := store.RunFilter{Project: "flytesnacks", Domain: "development"}
		_, token, err := traced.Actions.ListRuns(ctx, base, store.Page{Limit: 5})
		if err != nil || token == "" {
			t.Fatal(token, err)
		}
		for name, c := range map[string]struct {
			f     func(store.RunFilter) store.RunFilter
			token string
		}{
			"first page":  {func(f store.RunFilter) store.RunFilter { return f }, ""},
			"later page":  {func(f store.RunFilter) store.RunFilter { return f }, token},
			"phase":       {func(f store.RunFilter) store.RunFilter { f.Phases = []phase.Phase{phase.Queued}; return f }, ""},
			"task":        {func(f store.RunFilter) store.RunFilter { f.TaskName = "wf.main"; return f }, ""},
			"owner":       {func(f store.RunFilter) store.RunFilter { f.CreatedBy = "alice"; return f }, ""},
			"time window": {func(f store.RunFilter) store.RunFilter { f.CreatedAfter = time.Now().Add(-time.Hour); return f }, ""},
			"task name contains": {func(f store.RunFilter) store.RunFilter {
				f.TaskNameContains = []store.Substring{{Text: "MAIN", IgnoreCase: true}}
				return f
			}, ""},
			"paused": {func(f store.RunFilter) store.RunFilter { f.Paused = true; return f }, ""},
		} {
			if _, _, err := traced.Actions.ListRuns(ctx, c.f(base), store.Page{Limit: 5, Token: c.token}); err != nil {
				t.Fatal(err)
			}
			plan := explain(t, g, pg, rec.last(t))
			t.Logf("%s: %s", name, plan)
			if !strings.Contains(plan, "actions_runs") || strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "Sort") {
				t.Errorf("%s: the plan does not read an index of runs in order:\n%s", name, plan)
			}
			if name == "paused" && !strings.Contains(plan, "actions_paused_idx") {
				t.Errorf("paused: the plan does not probe the index of paused actions:\n%s", plan)
			}
		}
	})
}

func explain(t *testing.T, g *gorm.DB, pg bool, sql string) string {
	t.Helper()
	var lines []string
	err := g.Transaction(func(tx *gorm.DB) error {
		prefix := "EXPLAIN QUERY PLAN "
		if pg {
			prefix = "EXPLAIN "
			// A table this small is read whole otherwise; the question is
			// whether an index serves the query at all.
			if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
				return err
			}
		}
		rows, err := tx.Raw(prefix + sql).Rows()
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			lines = append(lines, fmt.Sprint(vals[len(vals)-1]))
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

// Every statement of a page of task groups reads the index of root
// actions by task, on both databases: the aggregates walk it once (only the
// few groups are sorted after), each group's details and newest runs are
// index ranges.
func TestTaskGroupsUseAnIndex(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for i := 0; i < 30; i++ {
			n := newRun(store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%02d", i)})
			n.Task.Name = fmt.Sprintf("wf.t%d", i%3)
			if _, err := s.Actions.CreateRun(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		rec := &statements{Interface: logger.Discard}
		traced := store.New(g.Session(&gorm.Session{Logger: rec}))
		groups, _, err := traced.Actions.ListTaskGroups(ctx, store.GroupFilter{Project: "flytesnacks", Domain: "development"}, store.Page{})
		if err != nil || len(groups) != 3 {
			t.Fatal(groups, err)
		}
		rec.mu.Lock()
		sqls := append([]string(nil), rec.sql...)
		rec.mu.Unlock()
		pg := db.Dialect(g) == db.Postgres
		for _, sql := range sqls {
			if !strings.HasPrefix(sql, "SELECT") {
				continue // the snapshot's transaction control
			}
			plan := explain(t, g, pg, sql)
			if !strings.Contains(plan, "actions_runs") {
				t.Errorf("a task group statement reads no index of runs:\n%s\n%s", sql, plan)
			}
		}
	})
}

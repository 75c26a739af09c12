package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/store"
)

// ListTasks of a project with the console's filters reads the tasks'
// project (or name) index in order, on both databases: deployed_by filters
// the rows the index yields and the deploy-time bounds are index ranges.
func TestListTasksUsesAnIndex(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for i := 0; i < 30; i++ {
			spec := []byte(fmt.Sprintf("spec %d", i))
			_, _, err := s.Tasks.Deploy(ctx, store.Task{
				TaskID:     store.TaskID{Project: "flytesnacks", Domain: "development", Name: fmt.Sprintf("env.t%d", i%3), Version: fmt.Sprint(i)},
				SpecDigest: store.SpecDigest(spec), DeployedBy: []string{"alice", "bob"}[i%2],
			}, spec)
			if err != nil {
				t.Fatal(err)
			}
		}
		rec := &statements{Interface: logger.Discard}
		traced := store.New(g.Session(&gorm.Session{Logger: rec}))
		pg := db.Dialect(g) == db.Postgres
		base := store.TaskFilter{Project: "flytesnacks", Domain: "development"}
		_, token, err := traced.Tasks.List(ctx, base, store.Page{Limit: 5})
		if err != nil || token == "" {
			t.Fatal(token, err)
		}
		for name, c := range map[string]struct {
			f     func(store.TaskFilter) store.TaskFilter
			token string
		}{
			"later page":  {func(f store.TaskFilter) store.TaskFilter { return f }, token},
			"name":        {func(f store.TaskFilter) store.TaskFilter { f.Name = "env.t1"; return f }, ""},
			"deployed_by": {func(f store.TaskFilter) store.TaskFilter { f.DeployedBy = []string{"alice", "carol"}; return f }, ""},
			"name contains": {func(f store.TaskFilter) store.TaskFilter {
				f.NameContains = []store.Substring{{Text: "T1", IgnoreCase: true}}
				return f
			}, ""},
			"time window": {func(f store.TaskFilter) store.TaskFilter {
				f.DeployedAfter, f.DeployedBefore = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
				return f
			}, ""},
		} {
			if _, _, err := traced.Tasks.List(ctx, c.f(base), store.Page{Limit: 5, Token: c.token}); err != nil {
				t.Fatal(err)
			}
			plan := explain(t, g, pg, rec.last(t))
			t.Logf("%s: %s", name, plan)
			if !strings.Contains(plan, "tasks_project_idx") && !strings.Contains(plan, "tasks_name_idx") ||
				strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "Sort") {
				t.Errorf("%s: the plan does not read an index of tasks in order:\n%s", name, plan)
			}
		}
	})
}

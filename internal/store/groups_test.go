package store_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Runs of two tasks, some finished: each group's aggregates are what the
// runs say, the groups page newest first, and the date range bounds them.
func TestTaskGroups(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		mk := func(i int, task, by string, at time.Time) store.ActionKey {
			t.Helper()
			key := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%02d", i)}
			n := newRun(key)
			n.Task.Name, n.ShortName, n.EnvironmentName = task, "short-"+task, "env-"+task
			n.CreatedBy, n.CreatedAt = by, at
			if _, err := s.Actions.CreateRun(ctx, n); err != nil {
				t.Fatal(err)
			}
			return key.Action(store.RootName)
		}
		step := func(key store.ActionKey, p phase.Phase, at time.Time, errInfo []byte) {
			t.Helper()
			if _, err := s.Actions.Update(ctx, key, store.AnyVersion, store.Update{Phase: p, At: at, ErrorInfo: errInfo}); err != nil {
				t.Fatal(err)
			}
		}
		// Task a: 7 runs a minute apart; r00 ran 2 s after creation and
		// succeeded after 10 s, r01 ran after 4 s and failed after 20 s.
		for i := 0; i < 7; i++ {
			mk(i, "wf.a", []string{"alice", "bob"}[i%2], base.Add(time.Duration(i)*time.Minute))
		}
		r0, r1 := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r00"}.Action(store.RootName),
			store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r01"}.Action(store.RootName)
		step(r0, phase.Running, base.Add(2*time.Second), nil)
		step(r0, phase.Succeeded, base.Add(10*time.Second), nil)
		step(r1, phase.Running, base.Add(time.Minute+4*time.Second), nil)
		step(r1, phase.Failed, base.Add(time.Minute+20*time.Second), []byte("an error"))
		// Task b: one run, later than every run of a.
		mk(20, "wf.b", "carol", base.Add(time.Hour))

		f := store.GroupFilter{Project: "flytesnacks", Domain: "development"}
		groups, next, err := s.Actions.ListTaskGroups(ctx, f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if next != "" || len(groups) != 2 || groups[0].TaskName != "wf.b" || groups[1].TaskName != "wf.a" {
			t.Fatalf("groups = %+v, next %q; want wf.b then wf.a on one page", groups, next)
		}
		a := groups[1]
		if a.Total != 7 || a.ShortName != "short-wf.a" || a.EnvironmentName != "env-wf.a" {
			t.Fatalf("group a = %+v", a)
		}
		if !a.LatestRun.Equal(base.Add(6*time.Minute)) || a.LatestFinished == nil || !a.LatestFinished.Equal(base.Add(time.Minute+20*time.Second)) {
			t.Fatalf("latest run %v, latest finished %v", a.LatestRun, a.LatestFinished)
		}
		if math.Abs(a.AvgDurationSeconds-15) > 0.01 || math.Abs(a.AvgToRunningSeconds-3) > 0.01 {
			t.Fatalf("average duration %v s, to running %v s; want 15 and 3", a.AvgDurationSeconds, a.AvgToRunningSeconds)
		}
		want := map[phase.Phase]int64{phase.Queued: 5, phase.Succeeded: 1, phase.Failed: 1}
		if fmt.Sprint(a.PhaseCounts) != fmt.Sprint(want) {
			t.Fatalf("phase counts %v, want %v", a.PhaseCounts, want)
		}
		if len(a.Recent) != store.RecentRuns || a.Recent[0].RunName != "r06" || a.Recent[4].RunName != "r02" {
			t.Fatalf("recent = %+v, want r06..r02", a.Recent)
		}
		if fmt.Sprint(a.CreatedBy) != "[alice bob]" || len(a.FailureErrors) != 1 || string(a.FailureErrors[0]) != "an error" {
			t.Fatalf("creators %v, failure errors %q", a.CreatedBy, a.FailureErrors)
		}

		// One group a page: the token leads to the next group, then none.
		first, token, err := s.Actions.ListTaskGroups(ctx, f, store.Page{Limit: 1})
		if err != nil || len(first) != 1 || first[0].TaskName != "wf.b" || token == "" {
			t.Fatalf("first page %+v, %q, %v", first, token, err)
		}
		second, token, err := s.Actions.ListTaskGroups(ctx, f, store.Page{Limit: 1, Token: token})
		if err != nil || len(second) != 1 || second[0].TaskName != "wf.a" || token != "" {
			t.Fatalf("second page %+v, %q, %v", second, token, err)
		}
		f.Ascending = true
		if asc, _, err := s.Actions.ListTaskGroups(ctx, f, store.Page{}); err != nil || asc[0].TaskName != "wf.a" {
			t.Fatalf("ascending %+v, %v", asc, err)
		}
		if _, _, err := s.Actions.ListTaskGroups(ctx, f, store.Page{Token: second[0].TaskName}); err == nil {
			t.Fatal("a malformed token was accepted")
		}

		// The range [base+1m, base+3m) holds r01 and r02 of a only.
		ranged := store.GroupFilter{Project: "flytesnacks", Domain: "development", CreatedAfter: base.Add(time.Minute), CreatedBefore: base.Add(3 * time.Minute)}
		groups, _, err = s.Actions.ListTaskGroups(ctx, ranged, store.Page{})
		if err != nil || len(groups) != 1 || groups[0].Total != 2 || groups[0].PhaseCounts[phase.Failed] != 1 {
			t.Fatalf("ranged groups %+v, %v", groups, err)
		}
		one, ok, err := s.Actions.TaskGroup(ctx, ranged, "wf.b")
		if err != nil || ok {
			t.Fatalf("wf.b in range: %+v %v %v", one, ok, err)
		}
		one, ok, err = s.Actions.TaskGroup(ctx, f, "wf.b")
		if err != nil || !ok || one.Total != 1 || fmt.Sprint(one.CreatedBy) != "[carol]" {
			t.Fatalf("wf.b: %+v %v %v", one, ok, err)
		}
	})
}

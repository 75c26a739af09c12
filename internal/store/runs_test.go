package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Runs created with the same timestamp (ties are broken by id), pages
// requested with new runs inserted between them: every run that existed
// when the listing started comes back exactly once, in order.
func TestListRunsKeyset(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		create := func(i int, at time.Time) {
			t.Helper()
			n := newRun(store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%03d", i)})
			n.CreatedAt = at
			if _, err := s.Actions.CreateRun(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		const initial = 23
		for i := 0; i < initial; i++ {
			create(i, base.Add(time.Duration(i/3)*time.Millisecond)) // groups of three share a timestamp
		}
		filter := store.RunFilter{Project: "flytesnacks", Domain: "development"}
		extra := 1000
		for _, asc := range []bool{false, true} {
			filter.Ascending = asc
			seen := map[string]int{}
			var order []time.Time
			token := ""
			for {
				rows, next, err := s.Actions.ListRuns(ctx, filter, store.Page{Limit: 4, Token: token})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					seen[r.RunName]++
					order = append(order, r.CreatedAt)
				}
				// One run older than everything and one newer, between pages.
				create(extra, base.Add(-time.Hour))
				create(extra+1, base.Add(time.Hour))
				extra += 2
				if next == "" {
					break
				}
				token = next
			}
			for i := 0; i < initial; i++ {
				if n := seen[fmt.Sprintf("r%03d", i)]; n != 1 {
					t.Fatalf("asc=%v: r%03d listed %d times", asc, i, n)
				}
			}
			for name, n := range seen {
				if n != 1 {
					t.Fatalf("asc=%v: %s listed %d times", asc, name, n)
				}
			}
			for i := 1; i < len(order); i++ {
				if asc && order[i].Before(order[i-1]) || !asc && order[i].After(order[i-1]) {
					t.Fatalf("asc=%v: out of order at %d", asc, i)
				}
			}
		}
		// A token only fits the listing it came from.
		_, next, err := s.Actions.ListRuns(ctx, store.RunFilter{Project: "flytesnacks", Domain: "development"}, store.Page{Limit: 1})
		if err != nil || next == "" {
			t.Fatal(err)
		}
		_, _, err = s.Actions.ListRuns(ctx, store.RunFilter{Project: "flytesnacks", Domain: "development", Ascending: true}, store.Page{Token: next})
		wantErr(t, err, errs.ErrInvalid)
	})
}

func TestListRunsFilters(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
		for i := 0; i < 6; i++ {
			n := newRun(store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%d", i)})
			n.CreatedAt = base.Add(time.Duration(i) * time.Hour)
			if i%2 == 1 {
				n.Task.Name = "wf.other"
			}
			a := must[*store.Action](t)(s.Actions.CreateRun(ctx, n))
			if i < 2 {
				must[*store.Action](t)(s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running}))
			}
		}
		// Another project's run is never listed.
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(store.RunKey{Project: "other", Domain: "development", RunName: "r0"})))

		list := func(f store.RunFilter) string {
			t.Helper()
			f.Project, f.Domain = "flytesnacks", "development"
			rows, _, err := s.Actions.ListRuns(ctx, f, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			out := make([]string, len(rows))
			for i, r := range rows {
				out[i] = r.RunName
			}
			return fmt.Sprint(out)
		}
		for _, c := range []struct {
			f    store.RunFilter
			want string
		}{
			{store.RunFilter{}, "[r5 r4 r3 r2 r1 r0]"},
			{store.RunFilter{Ascending: true}, "[r0 r1 r2 r3 r4 r5]"},
			{store.RunFilter{Phases: []phase.Phase{phase.Running}}, "[r1 r0]"},
			{store.RunFilter{Phases: []phase.Phase{phase.Queued, phase.Succeeded}}, "[r5 r4 r3 r2]"},
			{store.RunFilter{TaskName: "wf.other"}, "[r5 r3 r1]"},
			{store.RunFilter{CreatedAfter: base.Add(2 * time.Hour), CreatedBefore: base.Add(4 * time.Hour)}, "[r3 r2]"},
			{store.RunFilter{CreatedBy: "bob"}, "[]"},
		} {
			if got := list(c.f); got != c.want {
				t.Errorf("%+v: got %s, want %s", c.f, got, c.want)
			}
		}
		orgWide, _, err := s.Actions.ListRuns(ctx, store.RunFilter{}, store.Page{})
		if err != nil || len(orgWide) != 7 {
			t.Fatalf("org-wide runs = %d, %v", len(orgWide), err)
		}
	})
}

// ListRuns finds the runs by a part of their task's name, with or without
// case, and the runs that have a paused action (the root or any other).
func TestListRunsByTaskNamePartAndPaused(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, _ *gorm.DB) {
		ctx := context.Background()
		run := func(name, task string) store.RunKey {
			key := store.RunKey{Project: "p", Domain: "development", RunName: name}
			n := newRun(key)
			n.Task.Name = task
			if _, err := s.Actions.CreateRun(ctx, n); err != nil {
				t.Fatal(err)
			}
			return key
		}
		run("r1", "wf.Boom")
		r2 := run("r2", "wf.quiet")
		run("r3", "other.boomer")
		child := newRun(r2)
		child.Key, child.ParentName, child.RunSpec = r2.Action("c1"), store.RootName, nil
		c, _, err := s.Actions.CreateChild(ctx, child)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Actions.Update(ctx, c.ActionKey, c.ResourceVersion, store.Update{Phase: phase.Paused}); err != nil {
			t.Fatal(err)
		}
		names := func(f store.RunFilter) []string {
			t.Helper()
			f.Project, f.Domain = "p", "development"
			rows, _, err := s.Actions.ListRuns(ctx, f, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.RunName)
			}
			slices.Sort(out)
			return out
		}
		for name, c := range map[string]struct {
			f    store.RunFilter
			want []string
		}{
			"any case":   {store.RunFilter{TaskNameContains: []store.Substring{{Text: "BOOM", IgnoreCase: true}}}, []string{"r1", "r3"}},
			"exact case": {store.RunFilter{TaskNameContains: []store.Substring{{Text: "Boom"}}}, []string{"r1"}},
			"both parts": {store.RunFilter{TaskNameContains: []store.Substring{{Text: "wf.", IgnoreCase: true}, {Text: "oo"}}}, []string{"r1"}},
			// A wildcard of LIKE is an ordinary character here.
			"no wildcard": {store.RunFilter{TaskNameContains: []store.Substring{{Text: "%"}}}, nil},
			"paused":      {store.RunFilter{Paused: true}, []string{"r2"}},
		} {
			if got := names(c.f); !slices.Equal(got, c.want) {
				t.Errorf("%s: runs = %v, want %v", name, got, c.want)
			}
		}
	})
}

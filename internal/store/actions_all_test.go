package store_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/store"
)

// ListAll pages through every action of every run by id, filtered by
// column, and says at which version it read; OldestChange and
// CompactChanges say how far back the change log reaches.
func TestListAllAndCompaction(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		other := store.RunKey{Project: "p2", Domain: "d", RunName: "r2"}
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(other)))
		for _, n := range []string{"c1", "c2", "c3"} {
			if _, _, err := s.Actions.CreateChild(ctx, child(run1, n, store.RootName)); err != nil {
				t.Fatal(err)
			}
		}
		current := must[int64](t)(s.Actions.CurrentVersion(ctx))

		var names []string
		var after int64
		for pages := 0; ; pages++ {
			p := must[store.AllPage](t)(s.Actions.ListAll(ctx, store.AllFilter{}, after, 2))
			if p.ResourceVersion != current {
				t.Fatalf("page read at version %d, want %d", p.ResourceVersion, current)
			}
			for _, a := range p.Actions {
				names = append(names, a.RunName+"/"+a.Name)
				after = a.ID
			}
			if !p.More {
				if pages != 2 {
					t.Errorf("%d pages of 2 for 5 actions, want 3", pages+1)
				}
				break
			}
		}
		want := []string{run1.RunName + "/a0", "r2/a0", run1.RunName + "/c1", run1.RunName + "/c2", run1.RunName + "/c3"}
		if len(names) != len(want) {
			t.Fatalf("listed %v, want %v", names, want)
		}
		for i := range want {
			if names[i] != want[i] {
				t.Fatalf("listed %v, want %v", names, want)
			}
		}

		for f, n := range map[store.AllFilter]int{
			{Project: "p2"}:                      1,
			{RunName: run1.RunName}:              4,
			{RunName: run1.RunName, Name: "c2"}:  1,
			{Roots: true}:                        2,
			{Children: true}:                     3,
			{Project: "p2", RunName: "nonesuch"}: 0,
		} {
			p := must[store.AllPage](t)(s.Actions.ListAll(ctx, f, 0, 100))
			if len(p.Actions) != n || p.More {
				t.Errorf("ListAll(%+v) = %d actions (more %v), want %d", f, len(p.Actions), p.More, n)
			}
		}

		if v := must[int64](t)(s.Actions.OldestChange(ctx)); v != 1 {
			t.Errorf("OldestChange = %d before compaction, want 1", v)
		}
		if n := must[int64](t)(s.Actions.CompactChanges(ctx, current)); n != current-1 {
			t.Errorf("compaction deleted %d rows, want %d", n, current-1)
		}
		if v := must[int64](t)(s.Actions.OldestChange(ctx)); v != current {
			t.Errorf("OldestChange = %d after compaction, want %d", v, current)
		}
		must[int64](t)(s.Actions.CompactChanges(ctx, current+1))
		if v := must[int64](t)(s.Actions.OldestChange(ctx)); v != current+1 {
			t.Errorf("OldestChange of an empty log = %d, want %d", v, current+1)
		}
	})
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// A transaction that fails writes neither the action change nor its
// change_log row, and hands out no resource version.
func TestChangeLogIsAtomic(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))

		boom := errors.New("boom")
		err := s.InTx(ctx, func(tx *store.Store) error {
			if _, err := tx.Actions.CreateRun(ctx, newRun(store.RunKey{Project: "p", Domain: "d", RunName: "doomed"})); err != nil {
				return err
			}
			if _, err := tx.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v", err)
		}
		if v := must[int64](t)(s.Actions.CurrentVersion(ctx)); v != before {
			t.Fatalf("resource version moved from %d to %d", before, v)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM change_log"); n != 1 {
			t.Fatalf("change_log has %d rows, want 1", n)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE run_name = 'doomed'"); n != 0 {
			t.Fatal("rolled-back run is visible")
		}
		if got := must[*store.Action](t)(s.Actions.Get(ctx, a.ActionKey)); got.Phase != phase.Queued || got.ResourceVersion != a.ResourceVersion {
			t.Fatalf("rolled-back update is visible: %+v", got)
		}

		// A losing optimistic update writes nothing either.
		must[*store.Action](t)(s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running}))
		if _, err := s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Failed}); err == nil {
			t.Fatal("stale update succeeded")
		}
		if n := count(t, g, "SELECT COUNT(*) FROM change_log"); n != 2 {
			t.Fatalf("change_log has %d rows, want 2", n)
		}

		// Several changes in one transaction commit together.
		err = s.InTx(ctx, func(tx *store.Store) error {
			for _, n := range []string{"c1", "c2"} {
				if _, _, err := tx.Actions.CreateChild(ctx, child(run1, n, store.RootName)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM change_log"); n != 4 {
			t.Fatalf("change_log has %d rows, want 4", n)
		}
	})
}

// Concurrent writers on many actions: change_log versions are unique and
// strictly increasing, every committed change has exactly one row, and an
// action's resource version is that of its last change.
func TestChangeLogOrderUnderConcurrency(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		const workers, updates = 6, 8
		var wg sync.WaitGroup
		errc := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := store.RunKey{Project: "p", Domain: "d", RunName: fmt.Sprintf("w%d", w)}
				a, err := s.Actions.CreateRun(ctx, newRun(key))
				if err != nil {
					errc <- err
					return
				}
				for i := 0; i < updates; i++ {
					to := phase.Running
					if i%2 == 1 {
						to = phase.Initializing
					}
					if a, err = s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: to}); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}

		var all []store.Change
		after := int64(0)
		for {
			page := must[[]store.Change](t)(s.Actions.ChangesSince(ctx, after, 7))
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			after = page[len(page)-1].ResourceVersion
		}
		if len(all) != workers*(updates+1) {
			t.Fatalf("%d changes, want %d", len(all), workers*(updates+1))
		}
		last := map[string]int64{}
		for i, c := range all {
			if i > 0 && c.ResourceVersion <= all[i-1].ResourceVersion {
				t.Fatalf("change %d: version %d after %d", i, c.ResourceVersion, all[i-1].ResourceVersion)
			}
			if c.ObjectResourceVersion != c.ResourceVersion {
				t.Fatalf("change %d: object version %d != %d", i, c.ObjectResourceVersion, c.ResourceVersion)
			}
			last[c.Key.RunName] = c.ResourceVersion
		}
		if v := must[int64](t)(s.Actions.CurrentVersion(ctx)); v != all[len(all)-1].ResourceVersion {
			t.Fatalf("current version %d, last change %d", v, all[len(all)-1].ResourceVersion)
		}
		for run, v := range last {
			a := must[*store.Action](t)(s.Actions.Get(ctx, store.RunKey{Project: "p", Domain: "d", RunName: run}.Action(store.RootName)))
			if a.ResourceVersion != v {
				t.Fatalf("%s: action version %d, last change %d", run, a.ResourceVersion, v)
			}
		}
	})
}

// Two writers holding the same version: exactly one wins.
func TestOptimisticConcurrency(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		const racers = 5
		var wg sync.WaitGroup
		results := make(chan error, racers)
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running})
				results <- err
			}()
		}
		wg.Wait()
		close(results)
		wins := 0
		for err := range results {
			if err == nil {
				wins++
				continue
			}
			wantErr(t, err, errs.ErrConflict)
		}
		if wins != 1 {
			t.Fatalf("%d writers won, want 1", wins)
		}
	})
}

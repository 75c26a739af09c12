package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// EachOfRun reads a run of more than one page in one snapshot: a write
// committed while it reads (here, once the first page is read) is in none
// of the pages after.
func TestEachOfRunReadsOneSnapshot(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		const children = store.MaxPageSize // with the root, one more than a page
		errs := make(chan error, children)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < children; i += 8 {
					if _, _, err := s.Actions.CreateChild(ctx, child(run1, fmt.Sprintf("c%04d", i), store.RootName)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var last store.ActionKey // the newest: the second page's
		if err := s.Actions.EachOfRun(ctx, run1, func(a *store.Action) error { last = a.ActionKey; return nil }); err != nil {
			t.Fatal(err)
		}

		n := 0
		err := s.Actions.EachOfRun(ctx, run1, func(a *store.Action) error {
			if n == 0 {
				if _, err := s.Actions.Update(ctx, last, store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
					return err
				}
			}
			n++
			if a.ActionKey == last && a.Phase != phase.Queued {
				return fmt.Errorf("%s read %v: the read shows a write made after it began", a.Name, a.Phase)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != children+1 {
			t.Fatalf("read %d actions, want %d", n, children+1)
		}
		if a := must[*store.Action](t)(s.Actions.Get(ctx, last)); a.Phase != phase.Running {
			t.Fatalf("%s is %v after the read, want RUNNING", a.Name, a.Phase)
		}
	})
}

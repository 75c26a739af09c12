package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// DeleteRun: a run with an action still going, a pinned run and a missing
// run are refused; an ended run goes whole, a few actions per transaction
// (children before parents), with its attempts and events, and returns
// the specs nothing else uses, keeping those another run still uses.
func TestDeleteRun(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		store.SetDeleteChunk(t, 2)
		run2 := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "r2"}
		for _, r := range []store.RunKey{run1, run2} {
			must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(r)))
		}
		for i := range 3 {
			p := fmt.Sprintf("c%d", i)
			must[bool](t)(func() (bool, error) {
				_, created, err := s.Actions.CreateChild(ctx, child(run1, p, store.RootName))
				return created, err
			}())
			must[bool](t)(func() (bool, error) {
				gc := child(run1, p+"g", p)
				gc.Spec = []byte("grandchild spec")
				_, created, err := s.Actions.CreateChild(ctx, gc)
				return created, err
			}())
		}
		end := func(r store.RunKey) {
			t.Helper()
			if err := g.Exec(`UPDATE actions SET phase = ?, ended_at = ? WHERE run_name = ?`, int(phase.Succeeded), time.Now().UTC(), r.RunName).Error; err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Retention.DeleteRun(ctx, run1); !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("DeleteRun of a run still going: %v, want ErrPrecondition", err)
		}
		end(run1)
		end(run2)
		if err := s.Retention.Pin(ctx, run1, "t", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Retention.DeleteRun(ctx, run1); !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("DeleteRun of a pinned run: %v, want ErrPrecondition", err)
		}
		if pins := must[[]store.Pin](t)(s.Retention.Pins(ctx)); len(pins) != 1 || pins[0].RunKey != run1 {
			t.Fatalf("Pins = %+v", pins)
		}
		if err := s.Retention.Unpin(ctx, run1); err != nil {
			t.Fatal(err)
		}
		if err := s.Retention.Unpin(ctx, run1); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("Unpin of a run not pinned: %v", err)
		}
		ids := count(t, g, `SELECT COUNT(*) FROM actions WHERE run_name = 'r1'`)
		gone, err := s.Retention.DeleteRun(ctx, run1)
		if err != nil {
			t.Fatal(err)
		}
		if ids != 7 || gone.Actions < 4 { // chunks of 2 grandchildren/children, then the rest (cascades uncounted)
			t.Errorf("deleted %d of %d actions", gone.Actions, ids)
		}
		// run2 still uses the root's and children's spec digest ("task spec"); the grandchildren's and
		// children's specs were r1's alone.
		if len(gone.Specs) != 2 {
			t.Errorf("specs freed: %q, want the child and grandchild specs", gone.Specs)
		}
		for _, q := range []string{
			`SELECT COUNT(*) FROM actions WHERE run_name = 'r1'`,
			`SELECT COUNT(*) FROM action_attempts x WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.id = x.action_id)`,
			`SELECT COUNT(*) FROM action_events x WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.id = x.action_id)`,
		} {
			if n := count(t, g, q); n != 0 {
				t.Errorf("%s = %d", q, n)
			}
		}
		if _, err := s.Actions.Get(ctx, run2.Action(store.RootName)); err != nil {
			t.Errorf("the other run: %v", err)
		}
		if _, err := s.Retention.DeleteRun(ctx, run1); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("DeleteRun again: %v, want NotFound", err)
		}
		// Its change log rows go with CompactDeleted; run2's stay.
		before := count(t, g, `SELECT COUNT(*) FROM change_log WHERE run_name = 'r2'`)
		cur := must[int64](t)(s.Actions.CurrentVersion(ctx))
		must[int64](t)(s.Retention.CompactDeleted(ctx, 0, cur))
		if n := count(t, g, `SELECT COUNT(*) FROM change_log WHERE run_name = 'r1'`); n != 0 {
			t.Errorf("%d change log rows of r1 left", n)
		}
		if n := count(t, g, `SELECT COUNT(*) FROM change_log WHERE run_name = 'r2'`); n != before || n == 0 {
			t.Errorf("r2's change log rows: %d, were %d", n, before)
		}
	})
}

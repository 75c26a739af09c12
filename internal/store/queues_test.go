package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// A queue's depth is counted in the database inside the insert's
// transaction: concurrent submits never admit more than maxDepth actions
// that have not ended, the refused ones write nothing, a re-submit of an
// admitted action still succeeds, and an ended action frees its place.
func TestQueueDepthAdmission(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		root := newRun(run1)
		root.Queue, root.MaxDepth = "depth-3", 3
		if _, err := s.Actions.CreateRun(ctx, root); err != nil {
			t.Fatal(err)
		}
		onQueue := func(name string) store.NewAction {
			n := child(run1, name, store.RootName)
			n.Queue, n.MaxDepth = "depth-3", 3
			return n
		}

		const submits = 8
		var wg sync.WaitGroup
		results := make([]error, submits)
		for i := range submits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, results[i] = s.Actions.CreateChild(ctx, onQueue(fmt.Sprintf("c%d", i)))
			}()
		}
		wg.Wait()
		admitted := 0
		var admittedName string
		for i, err := range results {
			switch {
			case err == nil:
				admitted++
				admittedName = fmt.Sprintf("c%d", i)
			case !strings.Contains(err.Error(), `queue "depth-3" is full`):
				t.Errorf("submit %d: %v", i, err)
			default:
				wantErr(t, err, errs.ErrTooLarge)
				if _, gerr := s.Actions.Get(ctx, run1.Action(fmt.Sprintf("c%d", i))); gerr == nil {
					t.Errorf("refused c%d was written", i)
				}
			}
		}
		if admitted != 2 { // the root holds the third place
			t.Fatalf("%d of %d concurrent submits admitted to a depth-3 queue holding its root, want 2", admitted, submits)
		}
		counts := must[map[string]store.QueueCounts](t)(s.Actions.QueueCounts(ctx))
		if c := counts["depth-3"]; c.Depth != 3 || c.InFlight != 0 {
			t.Errorf("counts %+v, want depth 3, in flight 0", c)
		}

		// Enqueue is idempotent, also when the queue is full.
		if _, created, err := s.Actions.CreateChild(ctx, onQueue(admittedName)); err != nil || created {
			t.Errorf("re-submitting admitted %s: created=%v err=%v", admittedName, created, err)
		}
		// An action that runs still counts; one that ended frees its place.
		if _, err := s.Actions.Update(ctx, run1.Action(admittedName), store.AnyVersion, store.Update{Phase: phase.Running}); err != nil {
			t.Fatal(err)
		}
		counts = must[map[string]store.QueueCounts](t)(s.Actions.QueueCounts(ctx))
		if c := counts["depth-3"]; c.Depth != 3 || c.InFlight != 1 {
			t.Errorf("counts %+v, want depth 3, in flight 1", c)
		}
		if _, _, err := s.Actions.CreateChild(ctx, onQueue("late")); !errors.Is(err, errs.ErrTooLarge) {
			t.Errorf("submit to a full queue: %v", err)
		}
		if _, err := s.Actions.Update(ctx, run1.Action(admittedName), store.AnyVersion, store.Update{Phase: phase.Succeeded}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Actions.CreateChild(ctx, onQueue("late")); err != nil {
			t.Errorf("submit after one ended: %v", err)
		}
		// Other queues and unqueued actions are not counted.
		if _, _, err := s.Actions.CreateChild(ctx, child(run1, "free", store.RootName)); err != nil {
			t.Errorf("unqueued submit: %v", err)
		}
		got := must[*store.Action](t)(s.Actions.Get(ctx, run1.Action("late")))
		if got.Queue != "depth-3" {
			t.Errorf("stored queue %q", got.Queue)
		}
	})
}

package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// ChangeFeed is the change log with each change's action row, read in one
// query: the same changes as ChangesSince, each carrying the row as it is
// now (so newer than the change for all but the last), one row shared by
// the changes of one action.
func TestChangeFeedCarriesTheRow(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		other := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(store.RunKey{Project: "p", Domain: "d", RunName: "other"})))
		a = must[*store.Action](t)(s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running}))

		want := must[[]store.Change](t)(s.Actions.ChangesSince(ctx, 0, 100))
		got := must[[]store.Change](t)(s.Actions.ChangeFeed(ctx, 0, 100))
		if len(got) != 3 || len(want) != 3 {
			t.Fatalf("ChangeFeed has %d changes, ChangesSince %d; want 3", len(got), len(want))
		}
		for i := range got {
			c, w := got[i], want[i]
			if c.Action == nil {
				t.Fatalf("change %d (%s) carries no row", c.ResourceVersion, c.Key)
			}
			row := c.Action
			c.Action = nil
			if c.ResourceVersion != w.ResourceVersion || c.Kind != w.Kind || c.Op != w.Op || c.Key != w.Key ||
				c.ObjectResourceVersion != w.ObjectResourceVersion || !c.OccurredAt.Equal(w.OccurredAt) {
				t.Fatalf("change %d: %+v, ChangesSince has %+v", i, c, w)
			}
			if row.ActionKey != c.Key || row.ResourceVersion < c.ObjectResourceVersion {
				t.Fatalf("change %d of %s carries row %s at version %d", c.ResourceVersion, c.Key, row.ActionKey, row.ResourceVersion)
			}
		}
		if got[0].Action != got[2].Action {
			t.Fatal("the two changes of one action carry two copies of its row")
		}
		if r := got[0].Action; r.ResourceVersion != a.ResourceVersion || r.Phase != phase.Running || r.ID != a.ID ||
			string(r.RunSpec) != string(a.RunSpec) || r.InputURI != a.InputURI || !r.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("row %+v, want the action as it is now %+v", r, a)
		}
		if r := got[1].Action; r.ID != other.ID || r.ResourceVersion != other.ResourceVersion {
			t.Fatalf("row of %s is %+v", other.ActionKey, r)
		}

		after := must[[]store.Change](t)(s.Actions.ChangeFeed(ctx, got[0].ResourceVersion, 1))
		if len(after) != 1 || after[0].ResourceVersion != got[1].ResourceVersion {
			t.Fatalf("ChangeFeed(after %d, limit 1) = %+v", got[0].ResourceVersion, after)
		}
	})
}

// On PostgreSQL a committed change notifies every listener with its
// resource version (migration 0009's trigger); SQLite has no notifications.
func TestListenHearsCommittedChanges(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		connected := make(chan struct{}, 1)
		heard := make(chan string, 16)
		done := make(chan error, 1)
		go func() {
			done <- s.Actions.Listen(ctx, func() { connected <- struct{}{} }, func(p string) { heard <- p })
		}()
		if db.Dialect(g) != db.Postgres {
			if err := <-done; !errors.Is(err, db.ErrNoNotifications) {
				t.Fatalf("Listen on %s = %v, want ErrNoNotifications", db.Dialect(g), err)
			}
			return
		}
		select {
		case <-connected:
		case err := <-done:
			t.Fatalf("Listen ended: %v", err)
		case <-ctx.Done():
			t.Fatal("Listen never connected")
		}
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		select {
		case p := <-heard:
			if p != strconv.FormatInt(a.ResourceVersion, 10) {
				t.Fatalf("notification payload %q, want the change's version %d", p, a.ResourceVersion)
			}
		case err := <-done:
			t.Fatalf("Listen ended: %v", err)
		case <-ctx.Done():
			t.Fatal("no notification of the committed change")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Listen after its context ended = %v, want nil", err)
		}
	})
}

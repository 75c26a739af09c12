package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// savepoints counts the savepoints g has taken (the statements of kind
// "other": the counter does not see BEGIN and COMMIT).
func savepoints(t *testing.T, g *gorm.DB) uint64 {
	t.Helper()
	c := db.StatementCounts(g)
	if c == nil {
		t.Fatal("the test database counts no statements: it was not opened by db.Open")
	}
	return c[db.KindOther]
}

// A batch of the store's own action writes takes no savepoint; a batch
// with an InTx job takes one per job.
func TestGroupCommitSavepointsOnlyForInTx(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 8)
		batch := func(inTx bool) uint64 {
			release := holdCommitter(t, s)
			var pending []<-chan error
			for i, a := range runs[:4] {
				pending = append(pending, async(func() error {
					a = must[*store.Action](t)(s.Actions.Get(ctx, a.ActionKey))
					if inTx && i == 0 {
						return s.InTx(ctx, func(tx *store.Store) error {
							_, err := tx.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Events: []store.Event{{Attempt: 1, Phase: phase.Queued, Reason: "x"}}})
							return err
						})
					}
					_, err := s.Actions.UpdateFrom(ctx, a, store.Update{Events: []store.Event{{Attempt: 1, Phase: phase.Queued, Reason: "x"}}})
					return err
				}))
			}
			waitQueued(t, s, len(pending))
			before := savepoints(t, g)
			release()
			for _, c := range pending {
				if err := <-c; err != nil {
					t.Fatal(err)
				}
			}
			return savepoints(t, g) - before
		}
		if n := batch(false); n != 0 {
			t.Errorf("a batch of 4 UpdateFrom took %d savepoints, want none", n)
		}
		if n := batch(true); n < 4 {
			t.Errorf("a batch of 3 UpdateFrom and an InTx took %d savepoints, want one per job", n)
		}
	})
}

// A write that fails in a batch without savepoints (a stale row, a missing
// action, a lost fence) rolls the batch back; the others run again and
// commit, each caller hears its own outcome, and the versions stay
// contiguous.
func TestGroupCommitReplaysAfterAFailure(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 5)
		free := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		lease := must[*store.Lease](t)(s.Leases.Acquire(ctx, *free, store.Claimant{Holder: "h"}, time.Hour))
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))
		from := func(a *store.Action, fence int64) <-chan error {
			return async(func() error {
				_, err := s.Actions.UpdateFrom(ctx, a, store.Update{Phase: phase.Running, Fence: fence})
				return err
			})
		}
		stale := *runs[1]
		stale.ResourceVersion += 100

		release := holdCommitter(t, s)
		good1 := from(runs[0], lease.Token)
		staleErr := from(&stale, 0)
		missing := async(func() error {
			_, err := s.Actions.Update(ctx, runKey("nope").Action(store.RootName), store.AnyVersion, store.Update{Phase: phase.Running})
			return err
		})
		fenced := from(runs[2], lease.Token+5)
		good2 := from(runs[4], lease.Token)
		good3 := async(func() error {
			_, _, err := s.Actions.CreateChild(ctx, child(runs[0].RunKey, "c1", store.RootName))
			return err
		})
		var marked []store.Action
		good4 := async(func() error {
			var err error
			marked, err = s.Actions.RequestAbort(ctx, runs[3].ActionKey, nil)
			return err
		})
		waitQueued(t, s, 7)
		release()

		for _, c := range []<-chan error{good1, good2, good3, good4} {
			if err := <-c; err != nil {
				t.Fatalf("a good write in the batch failed: %v", err)
			}
		}
		wantErr(t, <-staleErr, errs.ErrConflict)
		wantErr(t, <-missing, errs.ErrNotFound)
		wantErr(t, <-fenced, store.ErrFenced)
		if len(marked) != 1 {
			t.Errorf("RequestAbort, run again, marked %d actions, want 1", len(marked))
		}

		wantContiguous(t, versionsAfter(t, g, before), before, 4)
		for i, want := range []phase.Phase{phase.Running, phase.Queued, phase.Queued, phase.Queued, phase.Running} {
			if got := must[*store.Action](t)(s.Actions.Get(ctx, runs[i].ActionKey)); got.Phase != want {
				t.Fatalf("r%d: phase %v, want %v", i, got.Phase, want)
			}
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE name = 'c1'"); n != 1 {
			t.Fatalf("%d children c1, want 1", n)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM action_events WHERE action_id = ?", runs[1].ID); n != 1 {
			t.Fatalf("the stale write left %d events, want only the creation's", n)
		}
	})
}

// Creates in one batch that can only tell what went wrong by reading (the
// action exists, with the same content or not, the parent is missing, the
// run's name is taken) get the outcome each would get alone, and the
// creates and writes beside them commit, with their ids, attempts and
// first events, under contiguous versions. On PostgreSQL the batch first
// goes out as one pipeline that reads nothing (pipeline.go).
func TestGroupCommitCreatesThatMustRead(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 3)
		run := runs[0].RunKey
		c0 := must[*store.Action](t)(func() (*store.Action, error) {
			a, _, err := s.Actions.CreateChild(ctx, child(run, "c0", store.RootName))
			return a, err
		}())
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))

		type created struct {
			a   *store.Action
			new bool
			err error
		}
		create := func(n store.NewAction) <-chan created {
			c := make(chan created, 1)
			go func() {
				a, isNew, err := s.Actions.CreateChild(ctx, n)
				c <- created{a, isNew, err}
			}()
			return c
		}
		release := holdCommitter(t, s)
		fresh := create(child(run, "c1", store.RootName))
		same := create(child(run, "c0", store.RootName))
		differs := child(run, "c0", store.RootName)
		differs.InputURI = "file:///elsewhere"
		different := create(differs)
		orphan := create(child(run, "c2", "nope"))
		taken := async(func() error {
			_, err := s.Actions.CreateRun(ctx, newRun(runs[1].RunKey))
			return err
		})
		newRoot := make(chan *store.Action, 1)
		root := async(func() error {
			a, err := s.Actions.CreateRun(ctx, newRun(runKey("fresh")))
			newRoot <- a
			return err
		})
		update := async(func() error {
			_, err := s.Actions.UpdateFrom(ctx, runs[2], store.Update{Phase: phase.Running})
			return err
		})
		waitQueued(t, s, 7)
		release()

		got := <-fresh
		if got.err != nil || !got.new {
			t.Fatalf("fresh create: new %v, %v", got.new, got.err)
		}
		if got := <-same; got.err != nil || got.new || got.a.ID != c0.ID {
			t.Fatalf("identical create: new %v, id %v (want %d), %v", got.new, got.a, c0.ID, got.err)
		}
		wantErr(t, (<-different).err, errs.ErrAlreadyExists)
		wantErr(t, (<-orphan).err, errs.ErrNotFound)
		wantErr(t, <-taken, errs.ErrAlreadyExists)
		if err := <-root; err != nil {
			t.Fatal(err)
		}
		if err := <-update; err != nil {
			t.Fatal(err)
		}
		wantContiguous(t, versionsAfter(t, g, before), before, 3)
		for _, a := range []*store.Action{got.a, <-newRoot} {
			read := must[*store.Action](t)(s.Actions.Get(ctx, a.ActionKey))
			if a.ID == 0 || read.ID != a.ID || read.ResourceVersion != a.ResourceVersion {
				t.Fatalf("%s: created with id %d at %d, stored with id %d at %d", a.ActionKey, a.ID, a.ResourceVersion, read.ID, read.ResourceVersion)
			}
			if n := count(t, g, "SELECT COUNT(*) FROM action_attempts WHERE action_id = ?", a.ID); n != 1 {
				t.Fatalf("%s: %d attempts, want 1", a.ActionKey, n)
			}
			if n := count(t, g, "SELECT COUNT(*) FROM action_events WHERE action_id = ? AND attempt = 1 AND version = 0", a.ID); n != 1 {
				t.Fatalf("%s: %d first events, want 1", a.ActionKey, n)
			}
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE name IN ('c2')"); n != 0 {
			t.Fatalf("the orphan was stored")
		}
	})
}

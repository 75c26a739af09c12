package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Group commit (batch.go): these tests line writers up behind a write that
// holds the committer, so that they form one batch, then check what each
// caller was told against what the database holds.

// holdCommitter starts a write that keeps s's committer busy until release
// is called; writes made meanwhile queue behind it and form the next batch.
func holdCommitter(t *testing.T, s *store.Store) (release func()) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(*store.Store) error {
			close(started)
			<-rel
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the holding write ended early: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the holding write did not start")
	}
	return func() {
		t.Helper()
		close(rel)
		if err := <-done; err != nil {
			t.Fatalf("the holding write: %v", err)
		}
	}
}

// waitQueued waits until n writes wait for s's committer.
func waitQueued(t *testing.T, s *store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for store.QueuedWrites(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", store.QueuedWrites(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// async runs fn in a goroutine and returns its outcome's channel.
func async(fn func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- fn() }()
	return c
}

func runKey(name string) store.RunKey {
	return store.RunKey{Project: "p", Domain: "d", RunName: name}
}

// createRuns creates runs r0..r(n-1).
func createRuns(t *testing.T, s *store.Store, n int) []*store.Action {
	t.Helper()
	var out []*store.Action
	for i := range n {
		out = append(out, must[*store.Action](t)(s.Actions.CreateRun(context.Background(), newRun(runKey(fmt.Sprintf("r%d", i))))))
	}
	return out
}

// versionsAfter is every change_log version above after, in order.
func versionsAfter(t *testing.T, g *gorm.DB, after int64) []int64 {
	t.Helper()
	var vs []int64
	if err := g.Raw("SELECT resource_version FROM change_log WHERE resource_version > ? ORDER BY resource_version", after).Scan(&vs).Error; err != nil {
		t.Fatal(err)
	}
	return vs
}

// wantContiguous fails unless vs is after+1, after+2, ... after+n.
func wantContiguous(t *testing.T, vs []int64, after int64, n int) {
	t.Helper()
	if len(vs) != n {
		t.Fatalf("%d changes committed (%v), want %d", len(vs), vs, n)
	}
	for i, v := range vs {
		if v != after+int64(i)+1 {
			t.Fatalf("change versions %v, want %d..%d without gaps", vs, after+1, after+int64(n))
		}
	}
}

// Writers queued together commit in one transaction: a COMMIT that fails
// (here a deferred foreign key one of them broke) fails every one of them
// and leaves nothing; without it they all commit, in one transaction, with
// versions handed out in order.
func TestGroupCommitOneTransaction(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for _, q := range []string{
			"CREATE TABLE poison_target (id INTEGER PRIMARY KEY)",
			"CREATE TABLE poison (ref INTEGER REFERENCES poison_target (id) DEFERRABLE INITIALLY DEFERRED)",
		} {
			if err := g.Exec(q).Error; err != nil {
				t.Fatal(err)
			}
		}
		const n = 8
		runs := createRuns(t, s, n)
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))
		updates := func() []<-chan error {
			var out []<-chan error
			for _, a := range runs {
				out = append(out, async(func() error {
					_, err := s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: phase.Running})
					return err
				}))
			}
			return out
		}

		release := holdCommitter(t, s)
		pending := updates()
		poisoned := async(func() error {
			return s.InTx(ctx, func(tx *store.Store) error {
				return store.ExecIn(tx, "INSERT INTO poison (ref) VALUES (42)") // checked at COMMIT
			})
		})
		waitQueued(t, s, n+1)
		release()
		wantErr(t, <-poisoned, errs.ErrPrecondition)
		for _, c := range pending {
			wantErr(t, <-c, errs.ErrPrecondition) // the batch's COMMIT failed: so did every write in it
		}
		if vs := versionsAfter(t, g, before); len(vs) != 0 {
			t.Fatalf("a batch whose COMMIT failed left changes %v", vs)
		}
		if v := must[int64](t)(s.Actions.CurrentVersion(ctx)); v != before {
			t.Fatalf("resource version moved from %d to %d", before, v)
		}
		for _, a := range runs {
			if got := must[*store.Action](t)(s.Actions.Get(ctx, a.ActionKey)); got.Phase != phase.Queued || got.ResourceVersion != a.ResourceVersion {
				t.Fatalf("%s: a write of the failed batch is visible: phase %v, version %d", a.RunName, got.Phase, got.ResourceVersion)
			}
		}

		release = holdCommitter(t, s)
		pending = updates()
		waitQueued(t, s, n)
		release()
		for _, c := range pending {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		vs := versionsAfter(t, g, before)
		wantContiguous(t, vs, before, n)
		for _, a := range runs {
			got := must[*store.Action](t)(s.Actions.Get(ctx, a.ActionKey))
			if got.Phase != phase.Running || got.ResourceVersion <= before {
				t.Fatalf("%s: phase %v, version %d after its write was acknowledged", a.RunName, got.Phase, got.ResourceVersion)
			}
		}
		if v := must[int64](t)(s.Actions.CurrentVersion(ctx)); v != vs[len(vs)-1] {
			t.Fatalf("current version %d, last change %d", v, vs[len(vs)-1])
		}
	})
}

// A writer that fails in a batch (stale version, missing action, lost
// fence, an InTx whose function fails after writing) is rolled back alone:
// the others commit, the versions it took are handed out again, and each
// caller is told its own outcome.
func TestGroupCommitFailingWriterRolledBackAlone(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 5)
		free := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		lease := must[*store.Lease](t)(s.Leases.Acquire(ctx, *free, store.Claimant{Holder: "h"}, time.Hour))
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))
		update := func(a *store.Action, expected int64, fence int64) <-chan error {
			return async(func() error {
				_, err := s.Actions.Update(ctx, a.ActionKey, expected, store.Update{Phase: phase.Running, Fence: fence})
				return err
			})
		}
		boom := errors.New("boom")

		release := holdCommitter(t, s)
		good1 := update(runs[0], runs[0].ResourceVersion, lease.Token)
		stale := update(runs[1], runs[1].ResourceVersion+100, 0)
		missing := update(&store.Action{ActionKey: runKey("nope").Action(store.RootName)}, store.AnyVersion, 0)
		fenced := update(runs[2], runs[2].ResourceVersion, lease.Token+5)
		doomed := async(func() error {
			return s.InTx(ctx, func(tx *store.Store) error {
				if _, err := tx.Actions.CreateRun(ctx, newRun(runKey("doomed"))); err != nil {
					return err
				}
				if _, err := tx.Actions.Update(ctx, runs[3].ActionKey, runs[3].ResourceVersion, store.Update{Phase: phase.Running}); err != nil {
					return err
				}
				return boom // after two writes
			})
		})
		good2 := update(runs[4], runs[4].ResourceVersion, lease.Token)
		good3 := async(func() error {
			_, _, err := s.Actions.CreateChild(ctx, child(runs[0].RunKey, "c1", store.RootName))
			return err
		})
		waitQueued(t, s, 7)
		release()

		for _, c := range []<-chan error{good1, good2, good3} {
			if err := <-c; err != nil {
				t.Fatalf("a good write in the batch failed: %v", err)
			}
		}
		wantErr(t, <-stale, errs.ErrConflict)
		wantErr(t, <-missing, errs.ErrNotFound)
		wantErr(t, <-fenced, store.ErrFenced)
		if err := <-doomed; !errors.Is(err, boom) {
			t.Fatalf("InTx = %v, want its function's error", err)
		}

		wantContiguous(t, versionsAfter(t, g, before), before, 3)
		for i, want := range []phase.Phase{phase.Running, phase.Queued, phase.Queued, phase.Queued, phase.Running} {
			if got := must[*store.Action](t)(s.Actions.Get(ctx, runs[i].ActionKey)); got.Phase != want {
				t.Fatalf("r%d: phase %v, want %v", i, got.Phase, want)
			}
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE run_name = 'doomed'"); n != 0 {
			t.Fatal("the failed InTx's run is visible")
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE name = 'c1'"); n != 1 {
			t.Fatalf("%d children c1, want 1", n)
		}
	})
}

// A writer whose caller gives up while it waits for its turn returns at
// once and writes nothing; the others in its batch still commit.
func TestGroupCommitDropsCancelledWriter(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 2)
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))

		release := holdCommitter(t, s)
		cctx, cancel := context.WithCancel(ctx)
		gaveUp := async(func() error {
			_, err := s.Actions.Update(cctx, runs[0].ActionKey, runs[0].ResourceVersion, store.Update{Phase: phase.Running})
			return err
		})
		waitQueued(t, s, 1)
		stays := async(func() error {
			_, err := s.Actions.Update(ctx, runs[1].ActionKey, runs[1].ResourceVersion, store.Update{Phase: phase.Running})
			return err
		})
		waitQueued(t, s, 2)
		cancel()
		// It returns while the committer is still held: it did not wait
		// for a batch.
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled writer = %v, want context.Canceled", err)
		}
		release()
		if err := <-stays; err != nil {
			t.Fatal(err)
		}
		if got := must[*store.Action](t)(s.Actions.Get(ctx, runs[0].ActionKey)); got.Phase != phase.Queued || got.ResourceVersion != runs[0].ResourceVersion {
			t.Fatalf("the cancelled write is visible: phase %v, version %d", got.Phase, got.ResourceVersion)
		}
		wantContiguous(t, versionsAfter(t, g, before), before, 1)
	})
}

// Writes inside InTx nest as savepoints: a failing one (returned to fn,
// which carries on) is rolled back alone, nested InTx included, and the
// versions it took go to the next write.
func TestGroupCommitNestedInTx(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 2)
		before := must[int64](t)(s.Actions.CurrentVersion(ctx))
		boom := errors.New("boom")
		err := s.InTx(ctx, func(tx *store.Store) error {
			if _, err := tx.Actions.Update(ctx, runs[0].ActionKey, runs[0].ResourceVersion+100, store.Update{Phase: phase.Running}); !errors.Is(err, errs.ErrConflict) {
				return fmt.Errorf("stale update = %v, want a conflict", err)
			}
			err := tx.InTx(ctx, func(inner *store.Store) error {
				if _, err := inner.Actions.CreateRun(ctx, newRun(runKey("inner"))); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				return fmt.Errorf("nested InTx = %v, want boom", err)
			}
			// What the nested InTx wrote is gone already, inside this transaction.
			if _, err := tx.Actions.Get(ctx, runKey("inner").Action(store.RootName)); !errors.Is(err, errs.ErrNotFound) {
				return fmt.Errorf("the rolled-back run reads as %v, want not found", err)
			}
			_, err = tx.Actions.Update(ctx, runs[1].ActionKey, runs[1].ResourceVersion, store.Update{Phase: phase.Running})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		wantContiguous(t, versionsAfter(t, g, before), before, 1)
		if got := must[*store.Action](t)(s.Actions.Get(ctx, runs[1].ActionKey)); got.Phase != phase.Running || got.ResourceVersion != before+1 {
			t.Fatalf("r1: phase %v, version %d, want RUNNING at %d", got.Phase, got.ResourceVersion, before+1)
		}
		if got := must[*store.Action](t)(s.Actions.Get(ctx, runs[0].ActionKey)); got.Phase != phase.Queued {
			t.Fatalf("r0: phase %v after a conflicting write", got.Phase)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM actions WHERE run_name = 'inner'"); n != 0 {
			t.Fatal("the nested InTx's run is visible")
		}
	})
}

// Two managers on one database (two pools, each with its committer) write
// at once while a watcher follows the change log: every write commits
// once, versions are unique, and the watcher, reading on from the last
// version it saw, misses none (a version below one it saw never commits
// later).
func TestGroupCommitTwoManagers(t *testing.T) {
	dbtest.EachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		g1 := dbtest.Migrated(t, dsn)
		g2, err := db.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close(g2) })
		managers := []*store.Store{store.New(g1), store.New(g2)}
		const writers, updates = 4, 6
		total := len(managers) * writers * (1 + updates)

		var seen []store.Change
		watched := make(chan error, 1)
		go func() {
			after := int64(0)
			deadline := time.Now().Add(2 * time.Minute)
			for len(seen) < total {
				if time.Now().After(deadline) {
					watched <- fmt.Errorf("the watcher saw %d changes of %d", len(seen), total)
					return
				}
				page, err := managers[0].Actions.ChangesSince(ctx, after, 50)
				if err != nil {
					watched <- err
					return
				}
				seen = append(seen, page...)
				if len(page) > 0 {
					after = page[len(page)-1].ResourceVersion
				} else {
					time.Sleep(time.Millisecond)
				}
			}
			watched <- nil
		}()

		var wg sync.WaitGroup
		errc := make(chan error, len(managers)*writers)
		for m, s := range managers {
			for w := range writers {
				wg.Go(func() {
					a, err := s.Actions.CreateRun(ctx, newRun(runKey(fmt.Sprintf("m%dw%d", m, w))))
					for i := 0; err == nil && i < updates; i++ {
						to := phase.Running
						if i%2 == 1 {
							to = phase.Initializing
						}
						a, err = s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{Phase: to})
					}
					if err != nil {
						errc <- err
					}
				})
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		if err := <-watched; err != nil {
			t.Fatal(err)
		}

		all := versionsAfter(t, g1, 0)
		if len(all) != total {
			t.Fatalf("%d changes committed, want %d", len(all), total)
		}
		for i, c := range seen {
			if c.ResourceVersion != all[i] {
				t.Fatalf("the watcher's change %d is version %d, the log's is %d: it missed one", i, c.ResourceVersion, all[i])
			}
		}
		for m := range managers {
			for w := range writers {
				a := must[*store.Action](t)(managers[0].Actions.Get(ctx, runKey(fmt.Sprintf("m%dw%d", m, w)).Action(store.RootName)))
				if a.Phase != phase.Initializing {
					t.Fatalf("m%dw%d: phase %v after its last write", m, w, a.Phase)
				}
			}
		}
	})
}

// OnCommit hears every commit that changed actions before its writer
// returns, and nothing else: a write refused, or a transaction that changed
// no action, wakes no one.
func TestOnCommitHearsChanges(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		var heard atomic.Int64
		s.Actions.OnCommit(func() { heard.Add(1) })
		want := func(n int64, after string) {
			t.Helper()
			if got := heard.Load(); got != n {
				t.Fatalf("after %s: %d commits heard, want %d", after, got, n)
			}
		}
		r := createRuns(t, s, 1)[0]
		want(1, "a run was created")
		if _, err := s.Actions.Update(ctx, r.ActionKey, r.ResourceVersion+100, store.Update{Phase: phase.Running}); !errors.Is(err, errs.ErrConflict) {
			t.Fatalf("stale update: %v, want a conflict", err)
		}
		want(1, "a refused update")
		if err := s.InTx(ctx, func(*store.Store) error { return nil }); err != nil {
			t.Fatal(err)
		}
		want(1, "a transaction without changes")
		err := s.InTx(ctx, func(tx *store.Store) error {
			_, err := tx.Actions.Update(ctx, r.ActionKey, store.AnyVersion, store.Update{Phase: phase.Running})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want(2, "an update inside InTx")
	})
}

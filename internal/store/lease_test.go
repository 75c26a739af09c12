package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The lease rules: take a free lease, renew it, lose it to a takeover (which
// increments the token), and from then on every fenced write of the old
// holder fails and changes nothing, while the new holder's writes commit.
func TestLease(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		a := store.Claimant{Holder: "a", Host: "h1", WorkDir: "/w1"}
		b := store.Claimant{Holder: "b", Host: "h2", WorkDir: "/w2"}
		free := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		if free.Holder != "" || free.Token != 0 {
			t.Fatalf("a new database's lease: %+v", free)
		}
		la := must[*store.Lease](t)(s.Leases.Acquire(ctx, *free, a, time.Minute))
		if la.Token != 1 || la.Holder != "a" {
			t.Fatalf("acquired %+v", la)
		}
		// A second claimant that observed the free lease loses the race.
		if _, err := s.Leases.Acquire(ctx, *free, b, time.Minute); err == nil {
			t.Fatal("two claimants took one lease")
		} else {
			wantErr(t, err, store.ErrLeaseTaken)
		}
		if err := s.Leases.Renew(ctx, store.LocalExecutorLease, "a", la.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		seen := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		if seen.Renewals != 1 || seen.Host != "h1" || seen.WorkDir != "/w1" || seen.ExpiresAt == nil {
			t.Fatalf("after a renewal: %+v", seen)
		}
		if _, err := s.Leases.Acquire(ctx, *la, b, time.Minute); err == nil {
			t.Fatal("a takeover with a stale observation (before the renewal) succeeded")
		}

		run := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		a1 := must[*store.Action](t)(s.Actions.Update(ctx, run.ActionKey, run.ResourceVersion,
			store.Update{Phase: phase.Initializing, Fence: la.Token, Owner: la.Token}))

		// b takes over the lease it saw stop moving.
		lb := must[*store.Lease](t)(s.Leases.Acquire(ctx, *seen, b, time.Minute))
		if lb.Token != la.Token+1 {
			t.Fatalf("takeover token %d, want %d", lb.Token, la.Token+1)
		}
		if err := s.Leases.Renew(ctx, store.LocalExecutorLease, "a", la.Token, time.Minute); err == nil {
			t.Fatal("the old holder renewed a lease it lost")
		} else {
			wantErr(t, err, store.ErrFenced)
		}
		// The old holder's fenced write fails and leaves the action alone.
		_, err := s.Actions.Update(ctx, run.ActionKey, a1.ResourceVersion, store.Update{Phase: phase.Succeeded, Fence: la.Token})
		wantErr(t, err, store.ErrFenced)
		now := must[*store.Action](t)(s.Actions.Get(ctx, run.ActionKey))
		if now.Phase != phase.Initializing || now.ResourceVersion != a1.ResourceVersion {
			t.Fatalf("a fenced write changed the action: phase %d at %d", now.Phase, now.ResourceVersion)
		}
		// The new holder records the attempt it starts as its own.
		must[*store.Action](t)(s.Actions.Update(ctx, run.ActionKey, a1.ResourceVersion,
			store.Update{Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true, Fence: lb.Token}))
		must[*store.Action](t)(s.Actions.Update(ctx, run.ActionKey, store.AnyVersion,
			store.Update{Phase: phase.Initializing, Fence: lb.Token, Owner: lb.Token}))
		atts := must[[]store.Attempt](t)(s.Actions.Attempts(ctx, run.ActionKey))
		if len(atts) != 2 || atts[0].OwnerToken != la.Token || atts[1].OwnerToken != lb.Token {
			t.Fatalf("attempt owners: %+v", atts)
		}

		// A released lease fences its last holder too, and is free to take.
		if err := s.Leases.Release(ctx, store.LocalExecutorLease, "b", lb.Token); err != nil {
			t.Fatal(err)
		}
		_, err = s.Actions.Update(ctx, run.ActionKey, store.AnyVersion, store.Update{Phase: phase.Running, Fence: lb.Token})
		wantErr(t, err, store.ErrFenced)
		rel := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		if rel.Holder != "" {
			t.Fatalf("released lease: %+v", rel)
		}
		lc := must[*store.Lease](t)(s.Leases.Acquire(ctx, *rel, a, time.Minute))
		if lc.Token != lb.Token+1 {
			t.Fatalf("token after release and acquire: %d", lc.Token)
		}
		// Unfenced writes (the API's) do not care who holds the lease.
		must[*store.Action](t)(s.Actions.Update(ctx, run.ActionKey, store.AnyVersion, store.Update{AbortRequested: true}))
	})
}

package attempt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/store"
)

// After a record the core does for every driver what follows: a retry frees
// the attempt's slot (the driver is asked to look at whoever waited for it)
// and waits out its backoff; an action that ended forgets its backoff, tells
// the driver, and has its unfinished descendants aborted.
func TestAfterRecord(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		tmpl := template("t.after", &core.Container{Args: []string{"a0"}}, nil)
		a := f.run(t, "rafter", tmpl, nil)
		kid := f.enqueueChild(t, a, "c1", tmpl, 1)
		other := f.run(t, "rwaits", tmpl, nil)

		type requeue struct {
			key   store.ActionKey
			delay time.Duration
		}
		var requeued []requeue
		var ended []store.ActionKey
		slots := attempt.NewSlots(1)
		c := attempt.New(f.state, attempt.Options{
			SystemRetries: 1, SystemBackoff: machine.Backoff{Base: time.Hour, Factor: 2, Cap: time.Hour}, Fence: f.hold(t),
			Slots:   slots,
			Requeue: func(k store.ActionKey, d time.Duration) { requeued = append(requeued, requeue{k, d}) },
			Ended:   func(k store.ActionKey) { ended = append(ended, k) },
		})
		if ok, _, _ := slots.Acquire(a.ActionKey, attempt.AskOf(a)); !ok {
			t.Fatal("the first attempt found no slot")
		}
		if ok, _, _ := slots.Acquire(other.ActionKey, attempt.AskOf(other)); ok {
			t.Fatal("a second attempt found a slot of one")
		}
		apply := func(ev machine.Event) {
			t.Helper()
			var dec machine.Decision
			var err error
			if a, dec, err = c.Apply(ctx, a, nil, ev, attempt.Record{}); err != nil {
				t.Fatalf("%s: %v", ev.Name(), err)
			}
			c.AfterRecord(ctx, a, dec)
		}

		apply(machine.Start{Attempt: 1})
		if len(requeued) != 0 || c.Backoff(a.ActionKey) != 0 {
			t.Fatalf("after a start: requeued %v, backoff %s", requeued, c.Backoff(a.ActionKey))
		}
		apply(attempt.PlatformFailure(1, "no process"))
		want := []requeue{{other.ActionKey, 0}, {a.ActionKey, time.Hour}}
		if !slices.Equal(requeued, want) {
			t.Fatalf("after a retry: requeued %v, want %v", requeued, want)
		}
		if left := c.Backoff(a.ActionKey); left <= 59*time.Minute || left > time.Hour {
			t.Fatalf("after a retry: backoff %s, want about an hour", left)
		}

		apply(machine.Start{Attempt: 2})
		apply(machine.Failed{Attempt: 2, Kind: machine.KindUser, Code: "E", Message: "m"})
		if !slices.Equal(ended, []store.ActionKey{a.ActionKey}) || c.Backoff(a.ActionKey) != 0 {
			t.Fatalf("after the end: ended %v, backoff %s", ended, c.Backoff(a.ActionKey))
		}
		if got, err := f.state.Get(ctx, kid.ActionKey); err != nil || got.AbortRequestedAt == nil {
			t.Fatalf("the unfinished child of an ended action: %+v, %v; want its abort requested", got, err)
		}
	})
}

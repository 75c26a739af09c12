package local

import (
	"testing"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

func akey(run, name string) store.ActionKey {
	return store.RunKey{Project: "p", Domain: "d", RunName: run}.Action(name)
}

func TestQueueDeduplicatesAndHandsEachKeyToOneWorker(t *testing.T) {
	q := newQueue(time.Millisecond, 10*time.Millisecond)
	a, b := akey("r", "a"), akey("r", "b")
	q.add(a)
	q.add(b)
	q.add(a)
	if n := q.len(); n != 2 {
		t.Fatalf("len %d after adding a twice", n)
	}
	k, _ := q.get()
	if k != a {
		t.Fatalf("got %v first", k)
	}
	// Added while held: not handed out again until done.
	q.add(a)
	k, _ = q.get()
	if k != b || q.len() != 0 {
		t.Fatalf("got %v, len %d", k, q.len())
	}
	q.done(a)
	if k, _ = q.get(); k != a {
		t.Fatalf("a was not queued again after done: %v", k)
	}
	q.done(a)
	q.done(b)
	if q.len() != 0 {
		t.Fatalf("len %d", q.len())
	}

	// Backoff: the key comes back by itself.
	q.retry(a)
	got := make(chan store.ActionKey)
	go func() { k, _ := q.get(); got <- k }()
	select {
	case k := <-got:
		if k != a {
			t.Fatalf("got %v", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("retried key never came back")
	}
	q.done(a)

	go func() { _, ok := q.get(); got <- store.ActionKey{Name: map[bool]string{true: "ok", false: "shut"}[ok]} }()
	time.Sleep(10 * time.Millisecond)
	q.shutdown()
	if k := <-got; k.Name != "shut" {
		t.Fatalf("get after shutdown: %v", k)
	}
	q.add(a)
	if q.len() != 0 {
		t.Fatal("add after shutdown queued")
	}
}

func TestLimiter(t *testing.T) {
	// A clock of its own: the test does not depend on how fast it runs.
	clock := time.Unix(1000, 0)
	l := newLimiter(1000, 2)
	l.now, l.last = func() time.Time { return clock }, clock
	if l.reserve() != 0 || l.reserve() != 0 {
		t.Fatal("burst not available")
	}
	if d := l.reserve(); d != time.Millisecond {
		t.Fatalf("third token: wait %s, want 1ms at 1000/s", d)
	}
	if d := l.reserve(); d != 2*time.Millisecond {
		t.Fatalf("fourth token: wait %s, want 2ms", d)
	}
	// The bucket refills at qps, never past the burst.
	clock = clock.Add(time.Hour)
	if l.reserve() != 0 || l.reserve() != 0 {
		t.Fatal("the burst did not refill")
	}
	if d := l.reserve(); d != time.Millisecond {
		t.Fatalf("after the refill: wait %s, want 1ms (the bucket holds at most the burst)", d)
	}

	stop := make(chan struct{})
	close(stop)
	l2 := newLimiter(0.001, 1)
	l2.reserve()
	if l2.wait(stop) {
		t.Fatal("wait ignored stop")
	}
}

// The change feed brings back the driver's own record of an action's wait
// for a slot (WAITING_FOR_RESOURCES): that write needs no look at the
// action. Any other change of a waiting action (an abort, say) does, and
// the row held for the wait goes: the look reads the action again.
func TestOwnWaitRecordIsNotLookedAtAgain(t *testing.T) {
	holder, waiter := akey("r", "a0"), akey("r", "a1")
	slots := attempt.NewSlots(1)
	if ok, _, _ := slots.Acquire(holder, attempt.Ask{}); !ok {
		t.Fatal("the first action found no slot")
	}
	if ok, _, _ := slots.Acquire(waiter, attempt.Ask{}); ok {
		t.Fatal("the second action found a slot")
	}
	d := &Driver{q: newQueue(time.Millisecond, time.Second), slots: slots, stopCh: make(chan struct{}),
		running: map[store.ActionKey]*ownAttempt{}, waitRows: map[store.ActionKey]*store.Action{waiter: {ActionKey: waiter, ResourceVersion: 7}}}
	follow := func(version int64) int {
		c := make(chan store.Change, 1)
		c <- store.Change{Op: store.ChangeModified, Key: waiter, ObjectResourceVersion: version}
		close(c)
		if d.followSub(&runstate.Subscription{C: c}) {
			t.Fatal("followSub stopped the driver")
		}
		return d.q.len()
	}
	if n := follow(7); n != 0 {
		t.Fatalf("the driver's own wait record queued the action (%d queued)", n)
	}
	if n := follow(8); n != 1 {
		t.Fatalf("a later change of a waiting action queued %d, want it queued", n)
	}
	if d.takeWaitRow(waiter) != nil {
		t.Fatal("the row held for the wait outlived a newer change")
	}
	// A change that arrives while a look uses the row (none held): the
	// look must not hold its older row again, or the next look would act
	// on it (an abort of a waiting action seen only once a slot frees).
	d.changedTo = map[store.ActionKey]int64{}
	if n := follow(9); n != 1 { // queued already by the change before: once
		t.Fatalf("a change of a waiting action with no row held queued %d, want it queued", n)
	}
	d.holdWaitRow(&store.Action{ActionKey: waiter, ResourceVersion: 8})
	if d.takeWaitRow(waiter) != nil {
		t.Fatal("a look held a row older than a change the feed brought meanwhile")
	}
	d.holdWaitRow(&store.Action{ActionKey: waiter, ResourceVersion: 9})
	if a := d.takeWaitRow(waiter); a == nil || a.ResourceVersion != 9 {
		t.Fatalf("the row read after the change was not held: %v", a)
	}
}

package local

import (
	"slices"
	"testing"
	"time"

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

func TestSlots(t *testing.T) {
	s := newSlots(2)
	r1a0, r1a, r1b, r1c := akey("r1", "a0"), akey("r1", "a"), akey("r1", "b"), akey("r1", "c")
	r2a0 := akey("r2", "a0")

	// Run limit 1: the root runs; its first child takes the root's place.
	if ok, _ := s.acquire(r1a0, "", 1); !ok {
		t.Fatal("root refused")
	}
	if ok, _ := s.acquire(r1a, "a0", 1); !ok {
		t.Fatal("first child refused: the parent should stop counting")
	}
	if g, r := s.counts(r1a0.RunKey); g != 1 || r != 1 {
		t.Fatalf("counts %d %d", g, r)
	}
	if ok, _ := s.acquire(r1b, "a0", 1); ok {
		t.Fatal("second child ran beside the first with a run limit of 1")
	}
	if ok, _ := s.acquire(r1c, "a0", 1); ok || !s.waits(r1c) {
		t.Fatal("third child not waiting")
	}
	// Another run takes the second global slot.
	if ok, _ := s.acquire(r2a0, "", 0); !ok {
		t.Fatal("other run refused")
	}
	// Releasing the running child wakes the oldest waiter of its run only.
	if wake := s.release(r1a); !slices.Equal(wake, []store.ActionKey{r1b}) {
		t.Fatalf("woke %v", wake)
	}
	if s.waits(r1b) || !s.waits(r1c) {
		t.Fatal("waiting list wrong after wake")
	}
	if ok, _ := s.acquire(r1b, "a0", 1); !ok {
		t.Fatal("woken child refused")
	}
	// The global limit: full.
	if ok, _ := s.acquire(akey("r3", "a0"), "", 0); ok {
		t.Fatal("third global slot")
	}
	s.forget(akey("r3", "a0"))
	if wake := s.release(r2a0); len(wake) != 0 {
		t.Fatalf("woke %v though r1 is at its limit", wake)
	}
	if wake := s.release(r1b); !slices.Equal(wake, []store.ActionKey{r1c}) {
		t.Fatalf("woke %v", wake)
	}
	// Releasing twice, or what was never held, changes nothing.
	s.release(r1b)
	s.release(akey("r9", "x"))
	s.release(r1a0)
	if g, r := s.counts(r1a0.RunKey); g != 0 || r != 0 {
		t.Fatalf("counts %d %d after releasing everything", g, r)
	}
}

// A parent that starts after its children began to wait stops counting, or
// the children would wait for the slot their parent holds forever.
func TestSlotsParentStartingAfterItsChildren(t *testing.T) {
	s := newSlots(1)
	other, root, c1 := akey("r", "x"), akey("r", "a0"), akey("r", "c1")
	if ok, _ := s.acquire(other, "", 0); !ok {
		t.Fatal("refused")
	}
	if ok, _ := s.acquire(root, "", 0); ok {
		t.Fatal("root ran beyond the limit")
	}
	if ok, _ := s.acquire(c1, "a0", 0); ok {
		t.Fatal("child ran beyond the limit")
	}
	if wake := s.release(other); !slices.Equal(wake, []store.ActionKey{root}) {
		t.Fatalf("woke %v", wake)
	}
	ok, wake := s.acquire(root, "", 0)
	if !ok || !slices.Equal(wake, []store.ActionKey{c1}) {
		t.Fatalf("root: %v, woke %v", ok, wake)
	}
	if ok, _ := s.acquire(c1, "a0", 0); !ok {
		t.Fatal("child refused while its parent holds the only slot")
	}
}

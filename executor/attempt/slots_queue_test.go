package attempt

import (
	"slices"
	"strings"
	"testing"

	"fmgr.dev/internal/store"
)

// A queue's maxActionConcurrency holds across runs; the waiter learns which
// queue holds it back and is woken, in arrival order, when a place frees.
func TestSlotsQueueActions(t *testing.T) {
	s := NewSlots(0)
	onQ := Ask{Parent: "a0", Queue: "serial-1", QueueActions: 1}
	r1a, r2a, r3a := akey("r1", "a"), akey("r2", "a"), akey("r3", "a")
	if ok, _, _ := s.Acquire(r1a, onQ); !ok {
		t.Fatal("first attempt on an empty queue refused")
	}
	ok, why, _ := s.Acquire(r2a, onQ)
	if ok || !strings.Contains(why, `queue "serial-1"`) || !strings.Contains(why, "maxActionConcurrency of 1") {
		t.Fatalf("second attempt on a capacity-1 queue: ok=%v why=%q", ok, why)
	}
	if ok, _, _ := s.Acquire(r3a, onQ); ok {
		t.Fatal("third attempt on a capacity-1 queue ran")
	}
	// Another queue and unqueued work are not held back.
	if ok, _, _ := s.Acquire(akey("r1", "b"), Ask{Parent: "a0", Queue: "other", QueueActions: 1}); !ok {
		t.Fatal("another queue is held back")
	}
	if ok, _, _ := s.Acquire(akey("r1", "c"), Ask{Parent: "a0"}); !ok {
		t.Fatal("unqueued work is held back")
	}
	if wake := s.Release(r1a); !slices.Equal(wake, []store.ActionKey{r2a}) {
		t.Fatalf("release woke %v, want only the oldest waiter %v", wake, r2a)
	}
	if ok, _, _ := s.Acquire(r2a, onQ); !ok {
		t.Fatal("woken waiter refused")
	}
	if n, _ := s.QueueCounts("serial-1"); n != 1 {
		t.Fatalf("serial-1 counts %d attempts", n)
	}
}

// A root routed to a capacity-1 queue (RunSpec.queue) whose children are
// on the same queue lends its place to them, as with the run's limit.
func TestSlotsQueueLendsParentsPlace(t *testing.T) {
	s := NewSlots(0)
	root, c1, c2 := akey("r1", "a0"), akey("r1", "c1"), akey("r1", "c2")
	if ok, _, _ := s.Acquire(root, Ask{Queue: "serial-1", QueueActions: 1}); !ok {
		t.Fatal("root refused")
	}
	child := Ask{Parent: "a0", Queue: "serial-1", QueueActions: 1}
	if ok, _, _ := s.Acquire(c1, child); !ok {
		t.Fatal("first child refused: the waiting parent still counts")
	}
	if ok, _, _ := s.Acquire(c2, child); ok {
		t.Fatal("two children ran at once on a capacity-1 queue")
	}
}

// maxRunConcurrency counts roots, which keep their run's place while their
// children run; children of an admitted run are not held back by it.
func TestSlotsQueueRuns(t *testing.T) {
	s := NewSlots(0)
	runs1 := Ask{Queue: "runs-1", QueueRuns: 1}
	r1, r2 := akey("r1", "a0"), akey("r2", "a0")
	if ok, _, _ := s.Acquire(r1, runs1); !ok {
		t.Fatal("first run refused")
	}
	ok, why, _ := s.Acquire(r2, runs1)
	if ok || !strings.Contains(why, `queue "runs-1" is at its maxRunConcurrency of 1`) {
		t.Fatalf("second run: ok=%v why=%q", ok, why)
	}
	// The first run's children (inheriting the queue) fan out freely.
	for _, c := range []string{"c1", "c2", "c3"} {
		if ok, _, wake := s.Acquire(akey("r1", c), Ask{Parent: "a0", Queue: "runs-1", QueueRuns: 1}); !ok || len(wake) != 0 {
			t.Fatalf("child %s: ok=%v wake=%v", c, ok, wake)
		}
	}
	if _, n := s.QueueCounts("runs-1"); n != 1 {
		t.Fatalf("runs-1 holds %d runs", n)
	}
	if wake := s.Release(r1); !slices.Equal(wake, []store.ActionKey{r2}) {
		t.Fatalf("the first run's end woke %v", wake)
	}
	if ok, _, _ := s.Acquire(r2, runs1); !ok {
		t.Fatal("second run refused after the first ended")
	}
	// An attempt found running holds its run's place.
	s.Hold(akey("r3", "a0"), runs1)
	if _, n := s.QueueCounts("runs-1"); n != 2 {
		t.Fatalf("runs-1 holds %d runs after Hold", n)
	}
}

package attempt

import (
	"slices"
	"testing"

	"fmgr.dev/internal/store"
)

func akey(run, name string) store.ActionKey {
	return store.RunKey{Project: "p", Domain: "d", RunName: run}.Action(name)
}

func TestSlots(t *testing.T) {
	s := NewSlots(2)
	r1a0, r1a, r1b, r1c := akey("r1", "a0"), akey("r1", "a"), akey("r1", "b"), akey("r1", "c")
	r2a0 := akey("r2", "a0")

	// Run limit 1: the root runs; its first child takes the root's place.
	if ok, _, _ := s.Acquire(r1a0, Ask{RunLimit: 1}); !ok {
		t.Fatal("root refused")
	}
	if ok, _, _ := s.Acquire(r1a, Ask{Parent: "a0", RunLimit: 1}); !ok {
		t.Fatal("first child refused: the parent should stop counting")
	}
	if g, r := s.Counts(r1a0.RunKey); g != 1 || r != 1 {
		t.Fatalf("counts %d %d", g, r)
	}
	if ok, _, _ := s.Acquire(r1b, Ask{Parent: "a0", RunLimit: 1}); ok {
		t.Fatal("second child ran beside the first with a run limit of 1")
	}
	if ok, _, _ := s.Acquire(r1c, Ask{Parent: "a0", RunLimit: 1}); ok || !s.Waits(r1c) {
		t.Fatal("third child not waiting")
	}
	// Another run takes the second global slot.
	if ok, _, _ := s.Acquire(r2a0, Ask{}); !ok {
		t.Fatal("other run refused")
	}
	// Releasing the running child wakes the oldest waiter of its run only.
	if wake := s.Release(r1a); !slices.Equal(wake, []store.ActionKey{r1b}) {
		t.Fatalf("woke %v", wake)
	}
	if s.Waits(r1b) || !s.Waits(r1c) {
		t.Fatal("waiting list wrong after wake")
	}
	if ok, _, _ := s.Acquire(r1b, Ask{Parent: "a0", RunLimit: 1}); !ok {
		t.Fatal("woken child refused")
	}
	// The global limit: full.
	if ok, _, _ := s.Acquire(akey("r3", "a0"), Ask{}); ok {
		t.Fatal("third global slot")
	}
	s.Forget(akey("r3", "a0"))
	if wake := s.Release(r2a0); len(wake) != 0 {
		t.Fatalf("woke %v though r1 is at its limit", wake)
	}
	if wake := s.Release(r1b); !slices.Equal(wake, []store.ActionKey{r1c}) {
		t.Fatalf("woke %v", wake)
	}
	// Releasing twice, or what was never held, changes nothing.
	s.Release(r1b)
	s.Release(akey("r9", "x"))
	s.Release(r1a0)
	if g, r := s.Counts(r1a0.RunKey); g != 0 || r != 0 {
		t.Fatalf("counts %d %d after releasing everything", g, r)
	}
}

// A parent that starts after its children began to wait stops counting, or
// the children would wait for the slot their parent holds forever.
func TestSlotsParentStartingAfterItsChildren(t *testing.T) {
	s := NewSlots(1)
	other, root, c1 := akey("r", "x"), akey("r", "a0"), akey("r", "c1")
	if ok, _, _ := s.Acquire(other, Ask{}); !ok {
		t.Fatal("refused")
	}
	if ok, _, _ := s.Acquire(root, Ask{}); ok {
		t.Fatal("root ran beyond the limit")
	}
	if ok, _, _ := s.Acquire(c1, Ask{Parent: "a0"}); ok {
		t.Fatal("child ran beyond the limit")
	}
	if wake := s.Release(other); !slices.Equal(wake, []store.ActionKey{root}) {
		t.Fatalf("woke %v", wake)
	}
	ok, _, wake := s.Acquire(root, Ask{})
	if !ok || !slices.Equal(wake, []store.ActionKey{c1}) {
		t.Fatalf("root: %v, woke %v", ok, wake)
	}
	if ok, _, _ := s.Acquire(c1, Ask{Parent: "a0"}); !ok {
		t.Fatal("child refused while its parent holds the only slot")
	}
}

// An attempt found running holds its slot whatever the limits say, and
// counts against them until it is released.
func TestSlotsHold(t *testing.T) {
	s := NewSlots(0)
	a, b := akey("r", "a"), akey("r", "b")
	s.Hold(a, Ask{})
	s.Hold(a, Ask{}) // once
	if ok, _, _ := s.Acquire(b, Ask{RunLimit: 1}); ok {
		t.Fatal("the run's limit of 1 let a second attempt start beside one held")
	}
	if wake := s.Release(a); len(wake) != 1 || wake[0] != b {
		t.Fatalf("release woke %v, want b", wake)
	}
	if ok, _, _ := s.Acquire(b, Ask{RunLimit: 1}); !ok {
		t.Fatal("b cannot start once a ended")
	}
}

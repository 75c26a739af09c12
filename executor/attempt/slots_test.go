package attempt

import (
	"slices"
	"strconv"
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

// Waking stops where the global capacity ends and keeps every other waiter
// in arrival order: those a run limit holds back in front of the woken, and
// those behind that were never looked at.
func TestSlotsWakeKeepsOrder(t *testing.T) {
	s := NewSlots(3)
	limited, l1, l2 := akey("lim", "a0"), akey("lim", "c1"), akey("lim", "c2")
	free := []store.ActionKey{akey("f1", "a0"), akey("f2", "a0"), akey("f3", "a0"), akey("f4", "a0")}
	// The limited run's root and first child run (the root lends its slot);
	// one more attempt fills the global limit.
	for _, a := range []struct {
		key store.ActionKey
		ask Ask
	}{{limited, Ask{RunLimit: 1}}, {l1, Ask{Parent: "a0", RunLimit: 1}}, {akey("x", "a0"), Ask{}}, {akey("y", "a0"), Ask{}}} {
		if ok, _, _ := s.Acquire(a.key, a.ask); !ok {
			t.Fatalf("%v refused", a.key)
		}
	}
	if ok, _, _ := s.Acquire(l2, Ask{Parent: "a0", RunLimit: 1}); ok {
		t.Fatal("second child of the limited run ran")
	}
	for _, k := range free {
		if ok, _, _ := s.Acquire(k, Ask{}); ok {
			t.Fatalf("%v ran beyond the global limit", k)
		}
	}
	// Two slots free up: the limited child stays in front, f1 and f2 go.
	s.Release(akey("x", "a0"))
	if got := s.Waiting(); got != 4 {
		t.Fatalf("%d waiting after the first release, want 4", got)
	}
	if ok, _, _ := s.Acquire(free[0], Ask{}); !ok {
		t.Fatal("woken f1 refused")
	}
	if wake := s.Release(akey("y", "a0")); !slices.Equal(wake, []store.ActionKey{free[1]}) {
		t.Fatalf("woke %v, want f2", wake)
	}
	if ok, _, _ := s.Acquire(free[1], Ask{}); !ok {
		t.Fatal("woken f2 refused")
	}
	// The limited run's child ends: its sibling goes first, then f3.
	if wake := s.Release(l1); !slices.Equal(wake, []store.ActionKey{l2}) {
		t.Fatalf("woke %v, want the limited run's waiting child", wake)
	}
	if ok, _, _ := s.Acquire(l2, Ask{Parent: "a0", RunLimit: 1}); !ok {
		t.Fatal("woken c2 refused")
	}
	if wake := s.Release(free[0]); !slices.Equal(wake, []store.ActionKey{free[2]}) {
		t.Fatalf("woke %v, want f3", wake)
	}
	if !s.Waits(free[3]) || s.Waiting() != 1 {
		t.Fatalf("f4 should be the only one waiting (%d waiting)", s.Waiting())
	}
}

// A release with thousands of actions waiting (one run's 10,000 children
// on 256 slots) costs what it wakes, not the length of the list.
func BenchmarkSlotsReleaseWithManyWaiting(b *testing.B) {
	const slots, children = 256, 10000
	for b.Loop() {
		s := NewSlots(slots)
		root := akey("r", "a0")
		s.Acquire(root, Ask{})
		var running []store.ActionKey
		for i := range children {
			k := akey("r", "c"+strconv.Itoa(i))
			if ok, _, _ := s.Acquire(k, Ask{Parent: "a0"}); ok {
				running = append(running, k)
			}
		}
		for len(running) > 0 {
			k := running[0]
			running = running[1:]
			for _, w := range s.Release(k) {
				if ok, _, _ := s.Acquire(w, Ask{Parent: "a0"}); ok {
					running = append(running, w)
				}
			}
		}
		if s.Waiting() != 0 {
			b.Fatalf("%d still waiting", s.Waiting())
		}
	}
}

// A waiter woken for a freed slot finds it still free when it comes back:
// an action that asks in between waits behind it instead of taking it (and
// sending the woken one to the end of the line). A woken action that never
// comes back lets the slot go when it is forgotten.
func TestSlotsKeepAWokenWaitersPlace(t *testing.T) {
	s := NewSlots(1)
	a, b, c := akey("r1", "a0"), akey("r2", "a0"), akey("r3", "a0")
	if ok, _, _ := s.Acquire(a, Ask{}); !ok {
		t.Fatal("first action refused")
	}
	if ok, _, _ := s.Acquire(b, Ask{}); ok {
		t.Fatal("second action took a second slot")
	}
	if wake := s.Release(a); !slices.Equal(wake, []store.ActionKey{b}) {
		t.Fatalf("woke %v, want the waiter", wake)
	}
	if ok, _, _ := s.Acquire(c, Ask{}); ok {
		t.Fatal("an action asking after the wake took the woken waiter's slot")
	}
	if ok, _, _ := s.Acquire(b, Ask{}); !ok {
		t.Fatal("the woken waiter found its slot taken")
	}
	if wake := s.Release(b); !slices.Equal(wake, []store.ActionKey{c}) {
		t.Fatalf("woke %v, want the action that waited behind", wake)
	}
	s.Forget(c) // ended before it came back
	if ok, _, _ := s.Acquire(a, Ask{}); !ok {
		t.Fatal("a forgotten woken action kept its slot")
	}
}

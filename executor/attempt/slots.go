package attempt

import (
	"math"
	"sync"

	"fmgr.dev/internal/store"
)

// Slots bound how many attempts run at once: at most max in total (max < 1: no limit), and per
// run at most the run's RunSpec.max_action_concurrency (0 = unlimited).
//
// An attempt whose action turns out to be a parent (one of its children asks
// for a slot) stops counting against either limit: a parent mostly waits for
// its children, and counting it would let a few nested parents hold every
// slot while the children they wait for never start (with a run limit of 1,
// no child could ever run). So the limits bound the attempts doing work.
//
// An action that finds no free slot is remembered as waiting, in arrival
// order; when capacity frees up, the waiting actions that can now go are
// returned, oldest first, for the caller to queue again.
type Slots struct {
	mu      sync.Mutex
	max     int
	used    int                  // attempts counted against max
	perRun  map[store.RunKey]int // attempts counted against each run's limit
	held    map[store.ActionKey]*hold
	waiting []waiter
	isWait  map[store.ActionKey]bool
}

type hold struct {
	counted bool // still counted against the limits
}

type waiter struct {
	key    store.ActionKey
	parent string
	limit  int
}

func NewSlots(max int) *Slots {
	if max < 1 {
		max = math.MaxInt // no limit but the runs'
	}
	return &Slots{
		max:    max,
		perRun: map[store.RunKey]int{},
		held:   map[store.ActionKey]*hold{},
		isWait: map[store.ActionKey]bool{},
	}
}

// Acquire takes a slot for key, a child of parent ("" for a run's root),
// whose run allows limit running attempts (0 = unlimited). Without a free
// slot it records key as waiting (keeping its place if it waits already)
// and returns false. wake lists waiting actions that can go now (a parent
// that stopped counting freed capacity).
func (s *Slots) Acquire(key store.ActionKey, parent string, limit int) (ok bool, wake []store.ActionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[key]; h != nil {
		return true, nil
	}
	s.lend(key.RunKey, parent)
	if s.used < s.max && (limit <= 0 || s.perRun[key.RunKey] < limit) {
		s.used++
		s.perRun[key.RunKey]++
		s.held[key] = &hold{counted: true}
		s.dropWaiting(key)
		return true, s.wakeLocked()
	}
	if !s.isWait[key] {
		s.isWait[key] = true
		s.waiting = append(s.waiting, waiter{key: key, parent: parent, limit: limit})
	}
	return false, s.wakeLocked()
}

// lend stops counting parent's attempt, if it runs: one of its children
// wants to run.
func (s *Slots) lend(run store.RunKey, parent string) {
	if parent == "" {
		return
	}
	if h := s.held[run.Action(parent)]; h != nil && h.counted {
		h.counted = false
		s.uncount(run)
	}
}

// Release frees key's slot and returns the waiting actions that may now
// take one (they are no longer recorded as waiting: the caller queues them
// and they call acquire again).
func (s *Slots) Release(key store.ActionKey) []store.ActionKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		return nil
	}
	delete(s.held, key)
	if h.counted {
		s.uncount(key.RunKey)
	}
	return s.wakeLocked()
}

func (s *Slots) uncount(run store.RunKey) {
	s.used--
	if s.perRun[run] <= 1 {
		delete(s.perRun, run)
	} else {
		s.perRun[run]--
	}
}

// wakeLocked picks waiters in order while simulated capacity remains,
// after the running parents of waiting children stopped counting (a parent
// that started after its children began to wait would otherwise hold the
// slot they wait for).
func (s *Slots) wakeLocked() []store.ActionKey {
	for _, w := range s.waiting {
		s.lend(w.key.RunKey, w.parent)
	}
	free := s.max - s.used
	if free <= 0 || len(s.waiting) == 0 {
		return nil
	}
	var out []store.ActionKey
	taken := map[store.RunKey]int{}
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		run := w.key.RunKey
		if free > 0 && (w.limit <= 0 || s.perRun[run]+taken[run] < w.limit) {
			free--
			taken[run]++
			out = append(out, w.key)
			delete(s.isWait, w.key)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	return out
}

// Forget drops key from the waiting list (it ended or was aborted).
func (s *Slots) Forget(key store.ActionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropWaiting(key)
}

func (s *Slots) dropWaiting(key store.ActionKey) {
	if !s.isWait[key] {
		return
	}
	delete(s.isWait, key)
	for i, w := range s.waiting {
		if w.key == key {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			break
		}
	}
}

// Waits reports whether key is recorded as waiting.
func (s *Slots) Waits(key store.ActionKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isWait[key]
}

// Counts reports the attempts counted against the global limit and against
// run's limit.
func (s *Slots) Counts(run store.RunKey) (global, ofRun int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.perRun[run]
}

// DropAllWaiting forgets every waiting action (the driver went on standby;
// whoever holds the lease next finds them with its scan).
func (s *Slots) DropAllWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.isWait)
	clear(s.waiting)
	s.waiting = s.waiting[:0]
}

// Waiting is how many actions wait for a slot.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// Hold counts key's running attempt, whatever the limits say: an attempt
// found running (after a restart or a takeover) holds its slot, so the
// limits count it until it ends.
func (s *Slots) Hold(key store.ActionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] != nil {
		return
	}
	s.dropWaiting(key)
	s.used++
	s.perRun[key.RunKey]++
	s.held[key] = &hold{counted: true}
}

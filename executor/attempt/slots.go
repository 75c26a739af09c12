package attempt

import (
	"fmt"
	"math"
	"sync"
	"time"

	"fmgr.dev/internal/store"
)

// Slots bound how many attempts run at once: at most max in total (max < 1:
// no limit), per run at most the run's RunSpec.max_action_concurrency, per
// named queue at most its maxActionConcurrency, and per named queue at most
// its maxRunConcurrency runs (0 = unlimited, each).
//
// An attempt whose action turns out to be a parent (one of its children asks
// for a slot) stops counting against the action limits (global, run,
// queue): a parent mostly waits for its children, and counting it would let
// a few nested parents hold every slot while the children they wait for
// never start (with a run or queue limit of 1, no child could ever run). So
// those limits bound the attempts doing work. A run's place on its queue
// (maxRunConcurrency) is different: the root holds it until its attempt
// ends, since it is the run, not the work, that the limit bounds.
//
// An action that finds no free slot is remembered as waiting, in arrival
// order; when capacity frees up, the waiting actions that can now go are
// returned, oldest first, for the caller to queue again.
type Slots struct {
	mu       sync.Mutex
	max      int
	used     int                  // attempts counted against max
	perRun   map[store.RunKey]int // attempts counted against each run's limit
	perQueue map[string]int       // attempts counted against each queue's action limit
	runsOn   map[string]int       // roots holding a run's place on each queue
	held     map[store.ActionKey]*hold
	waiting  []waiter
	isWait   map[store.ActionKey]bool
	// waitingChildren counts the waiting actions under each parent, so that
	// a parent taking a slot while children of its wait stops counting at
	// once, without a look at every waiter.
	waitingChildren map[store.ActionKey]int
	// promised holds the waiters woken and not back yet, and owed the
	// capacity they were woken for: theirs until they take it (Acquire)
	// or let it go (Forget), so that an action asking meanwhile cannot
	// take it and send them back to the end of the line, each return
	// costing the caller a look at the action. A promise not taken within
	// promiseTTL lapses (a woken action the caller never brought back).
	promised map[store.ActionKey]promise
	owed     tally
}

type promise struct {
	ask Ask
	at  time.Time
}

// promiseTTL is how long a woken waiter's capacity stays promised to it.
const promiseTTL = 10 * time.Second

// Ask is what an attempt asks a slot under: its place in the tree and the
// limits that apply to it.
type Ask struct {
	// Parent is the action's parent, "" for a run's root.
	Parent string
	// RunLimit is the run's max_action_concurrency (0: none).
	RunLimit int
	// Queue is the named queue the action is on ("" for none), with its
	// maxActionConcurrency and maxRunConcurrency (0: none). Only a root
	// takes a run's place.
	Queue        string
	QueueActions int
	QueueRuns    int
}

func (a Ask) takesRunPlace() bool { return a.Parent == "" && a.Queue != "" }

type hold struct {
	counted  bool // still counted against the action limits
	queue    string
	runPlace bool // a root holding its run's place on queue
}

type waiter struct {
	key store.ActionKey
	ask Ask
}

func NewSlots(max int) *Slots {
	if max < 1 {
		max = math.MaxInt // no limit but the runs' and queues'
	}
	return &Slots{
		max:      max,
		perRun:   map[store.RunKey]int{},
		perQueue: map[string]int{},
		runsOn:   map[string]int{},
		held:     map[store.ActionKey]*hold{},
		isWait:   map[store.ActionKey]bool{},
		promised: map[store.ActionKey]promise{},

		waitingChildren: map[store.ActionKey]int{},
	}
}

// Acquire takes a slot for key under ask. Without a free slot it records
// key as waiting (keeping its place if it waits already) and returns false
// with why: which limit holds it back, for the action's status. wake lists
// waiting actions that can go now (a parent that stopped counting freed
// capacity).
func (s *Slots) Acquire(key store.ActionKey, ask Ask) (ok bool, why string, wake []store.ActionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[key]; h != nil {
		return true, "", nil
	}
	s.unpromise(key)
	s.lend(key.RunKey, ask.Parent)
	if why = s.blocked(key.RunKey, ask, s.owed); why == "" {
		s.take(key, ask)
		s.dropWaiting(key)
		return true, "", s.wakeLocked()
	}
	if !s.isWait[key] {
		s.isWait[key] = true
		s.waiting = append(s.waiting, waiter{key: key, ask: ask})
		if ask.Parent != "" {
			s.waitingChildren[key.Action(ask.Parent)]++
		}
	}
	return false, why, s.wakeLocked()
}

// tally is capacity promised to waiters being woken but not yet taken.
type tally struct {
	global int
	run    map[store.RunKey]int
	queue  map[string]int
	runs   map[string]int
}

// blocked says which limit keeps an attempt of run under ask from starting
// ("" if none does), counting what t already promised.
func (s *Slots) blocked(run store.RunKey, ask Ask, t tally) string {
	if ask.takesRunPlace() && ask.QueueRuns > 0 && s.runsOn[ask.Queue]+t.runs[ask.Queue] >= ask.QueueRuns {
		return fmt.Sprintf("queue %q is at its maxRunConcurrency of %d (runs in flight)", ask.Queue, ask.QueueRuns)
	}
	if ask.Queue != "" && ask.QueueActions > 0 && s.perQueue[ask.Queue]+t.queue[ask.Queue] >= ask.QueueActions {
		return fmt.Sprintf("queue %q is at its maxActionConcurrency of %d (attempts running)", ask.Queue, ask.QueueActions)
	}
	if ask.RunLimit > 0 && s.perRun[run]+t.run[run] >= ask.RunLimit {
		return fmt.Sprintf("the run's max_action_concurrency of %d is reached", ask.RunLimit)
	}
	if s.used+t.global >= s.max {
		return "no free slot"
	}
	return ""
}

// remove takes back what add counted.
func (t *tally) remove(run store.RunKey, ask Ask) {
	t.global--
	decrement(t.run, run)
	if ask.Queue != "" {
		decrement(t.queue, ask.Queue)
		if ask.takesRunPlace() {
			decrement(t.runs, ask.Queue)
		}
	}
}

func (t *tally) add(run store.RunKey, ask Ask) {
	if t.run == nil {
		t.run, t.queue, t.runs = map[store.RunKey]int{}, map[string]int{}, map[string]int{}
	}
	t.global++
	t.run[run]++
	if ask.Queue != "" {
		t.queue[ask.Queue]++
		if ask.takesRunPlace() {
			t.runs[ask.Queue]++
		}
	}
}

// take counts key's attempt against every limit of ask.
func (s *Slots) take(key store.ActionKey, ask Ask) {
	h := &hold{counted: true, queue: ask.Queue, runPlace: ask.takesRunPlace()}
	s.used++
	s.perRun[key.RunKey]++
	if h.queue != "" {
		s.perQueue[h.queue]++
	}
	if h.runPlace {
		s.runsOn[h.queue]++
	}
	s.held[key] = h
	if s.waitingChildren[key] > 0 {
		// A parent whose children wait already: it waits for them (lend).
		h.counted = false
		s.uncount(key.RunKey, h.queue)
	}
}

// lend stops counting parent's attempt, if it runs: one of its children
// wants to run.
func (s *Slots) lend(run store.RunKey, parent string) {
	if parent == "" {
		return
	}
	if h := s.held[run.Action(parent)]; h != nil && h.counted {
		h.counted = false
		s.uncount(run, h.queue)
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
		s.uncount(key.RunKey, h.queue)
	}
	if h.runPlace {
		decrement(s.runsOn, h.queue)
	}
	return s.wakeLocked()
}

func (s *Slots) uncount(run store.RunKey, queue string) {
	s.used--
	decrement(s.perRun, run)
	if queue != "" {
		decrement(s.perQueue, queue)
	}
}

// decrement counts one less under k, dropping k at zero so the maps hold
// only what is in use.
func decrement[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// wakeLocked picks waiters in order while simulated capacity remains. The
// running parents of waiting children no longer count (Acquire lends a
// waiter's parent, take a parent whose children wait), so capacity here is
// what the attempts doing work leave.
//
// It stops at the first waiter once the global limit is used up (every
// waiter needs a global slot), so a release with thousands waiting costs
// what it wakes, not the length of the list; the list is only compacted
// when a waiter held back by another limit stays in front of one woken.
func (s *Slots) wakeLocked() []store.ActionKey {
	if len(s.waiting) == 0 {
		return nil
	}
	if s.used+s.owed.global >= s.max {
		s.lapsePromises()
	}
	var out []store.ActionKey
	kept := s.waiting[:0]
	i := 0
	for ; i < len(s.waiting) && s.used+s.owed.global < s.max; i++ {
		w := s.waiting[i]
		if s.blocked(w.key.RunKey, w.ask, s.owed) == "" {
			s.owed.add(w.key.RunKey, w.ask)
			s.promised[w.key] = promise{ask: w.ask, at: time.Now()}
			out = append(out, w.key)
			s.unwait(w)
			continue
		}
		kept = append(kept, w)
	}
	if len(kept) == 0 {
		// The woken are a prefix: drop it without moving the rest.
		clear(s.waiting[:i])
		s.waiting = s.waiting[i:]
		return out
	}
	n := len(kept) + copy(s.waiting[len(kept):], s.waiting[i:])
	clear(s.waiting[n:])
	s.waiting = s.waiting[:n]
	return out
}

// unpromise lets go of what was promised to key, if anything.
func (s *Slots) unpromise(key store.ActionKey) {
	if p, ok := s.promised[key]; ok {
		delete(s.promised, key)
		s.owed.remove(key.RunKey, p.ask)
	}
}

// lapsePromises lets go of the promises older than promiseTTL.
func (s *Slots) lapsePromises() {
	for key, p := range s.promised {
		if time.Since(p.at) > promiseTTL {
			s.unpromise(key)
		}
	}
}

// unwait forgets that w waits (the caller takes it off the list).
func (s *Slots) unwait(w waiter) {
	delete(s.isWait, w.key)
	if w.ask.Parent != "" {
		decrement(s.waitingChildren, w.key.Action(w.ask.Parent))
	}
}

// Forget drops key from the waiting list (it ended or was aborted).
func (s *Slots) Forget(key store.ActionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropWaiting(key)
	s.unpromise(key)
}

func (s *Slots) dropWaiting(key store.ActionKey) {
	if !s.isWait[key] {
		return
	}
	for i, w := range s.waiting {
		if w.key == key {
			s.unwait(w)
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

// InLine reports whether key waits for a slot, and whether it was woken
// for one that it has not taken yet.
func (s *Slots) InLine(key store.ActionKey) (waits, woken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, woken = s.promised[key]
	return s.isWait[key], woken
}

// Counts reports the attempts counted against the global limit and against
// run's limit.
func (s *Slots) Counts(run store.RunKey) (global, ofRun int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.perRun[run]
}

// QueueCounts reports the attempts counted against queue's action limit
// and the runs holding a place on it.
func (s *Slots) QueueCounts(queue string) (actions, runs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perQueue[queue], s.runsOn[queue]
}

// DropAllWaiting forgets every waiting action (the driver went on standby;
// whoever holds the lease next finds them with its scan).
func (s *Slots) DropAllWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.isWait)
	clear(s.promised)
	s.owed = tally{}
	clear(s.waitingChildren)
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
// found running (after a restart or a takeover) holds its slot, and its
// place on its queue, so the limits count it until it ends.
func (s *Slots) Hold(key store.ActionKey, ask Ask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] != nil {
		return
	}
	s.dropWaiting(key)
	s.take(key, ask)
}

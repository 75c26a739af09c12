package runstate

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/store"
)

// Hub fans the change log out to watchers. One dispatcher reads change_log
// with each change's action row (store.ChangeFeed) once per wake-up and
// hands each change to the subscribers that want it, so watchers neither
// query the log nor read the action again. It wakes on a local commit (the
// store tells it, Actions.OnCommit), on a PostgreSQL notification of another replica's commit
// (migration 0009), and on a poll that is the fallback for both.
//
// Subscribers are indexed by run: a change is offered to the subscribers of
// its run and to the few global ones (executors, run lists), so its cost
// does not grow with the number of watchers of other runs.
type Hub struct {
	actions *store.Actions
	log     *slog.Logger
	// poll is the fallback period while the hub hears notifications;
	// unheardPoll the period while it does not (SQLite, or the listener's
	// connection is down).
	poll, unheardPoll time.Duration
	limit             int // changes one subscriber may fall behind by

	wake  chan struct{} // a local write committed (wakeUp)
	heard chan struct{} // another replica's write committed

	listening  atomic.Bool
	dispatched atomic.Int64 // h.last, for the listener to skip what it saw
	stats      [numCauses]atomic.Int64
	offered    atomic.Int64

	mu      sync.Mutex
	started bool  // last is set: Start ran
	last    int64 // highest resource version dispatched
	byRun   map[store.RunKey]map[*Subscription]struct{}
	global  map[*Subscription]struct{}
}

// Filter chooses the changes a subscription receives: those of one run
// (ForRun, ForAction) or, for the few subscribers that follow everything,
// all that a predicate accepts (Matching).
type Filter struct {
	run   *store.RunKey // nil: every change is offered to match
	match func(store.Change) bool
}

// ForRun selects the changes of the action rows of one run (lists and
// children show rows, not history).
func ForRun(run store.RunKey) Filter {
	return Filter{run: &run, match: func(c store.Change) bool { return c.Kind == store.KindAction }}
}

// ForAction selects the changes of one action, its recorded events included.
func ForAction(key store.ActionKey) Filter {
	return Filter{run: &key.RunKey, match: func(c store.Change) bool { return c.Key.Name == key.Name }}
}

// Matching selects the changes of every run that match accepts. Each such
// subscriber costs every change a call: keep them few.
func Matching(match func(store.Change) bool) Filter { return Filter{match: match} }

// Subscription receives the changes its filter selects, in commit order.
// When the subscriber falls too far behind, C is closed and Overflowed
// reports true: the watcher must take a fresh snapshot (resync) rather
// than silently miss changes.
type Subscription struct {
	C      <-chan store.Change
	c      chan store.Change
	filter Filter
	hub    *Hub

	ready chan struct{} // queue has something, or the subscription closed
	done  chan struct{} // closed by Close

	mu         sync.Mutex
	queue      []store.Change // dispatched, not yet handed to C
	spare      []store.Change // the pump's last batch, for reuse
	closed     bool
	overflowed bool
}

// subscriptionBuffer is how many changes a subscriber may fall behind by
// before it is resynced. The backlog is a queue that grows only as far as
// it is used (no watcher pays for it up front), so it can hold a whole
// large run's worth: 10,000 children make about 50,000 changes, and a
// parent's WatchChildren that lags by all of them still catches up
// without a resync, where one resync would re-list every child.
const subscriptionBuffer = 1 << 16

// The poll periods: while the hub hears PostgreSQL notifications the poll
// only covers one that got lost; without them (SQLite, whose writers are
// all in this process and wake it, or a listener that is reconnecting)
// it is what brings other replicas' writes.
const (
	fallbackPoll = 5 * time.Second
	unheardPoll  = time.Second
	maxReconnect = 30 * time.Second
)

// What woke the dispatcher, for HubStats.
const (
	causeLocal = iota
	causeNotified
	causePolled
	numCauses
)

// HubStats counts the changes the hub dispatched by what woke it: a local
// commit, a notification from the database (another replica's
// commit), or the fallback poll; and Offered, how many times a change was
// matched against a subscriber (the dispatcher's work: the subscribers of
// the change's run and the global ones, not every subscriber).
type HubStats struct {
	Local, Notified, Polled int64
	Offered                 int64
}

// HubOption adjusts a hub.
type HubOption func(*Hub)

// WithFallbackPoll sets the poll period used while the hub hears
// notifications (default 5 s).
func WithFallbackPoll(d time.Duration) HubOption { return func(h *Hub) { h.poll = d } }

// NewHub builds a hub over the change log; Run dispatches. Every commit of
// actions' pool that changes actions wakes it (Actions.OnCommit): a write
// notifies by construction, never because its caller remembered to.
func NewHub(actions *store.Actions, log *slog.Logger, opts ...HubOption) *Hub {
	h := &Hub{
		actions: actions, log: log, poll: fallbackPoll, unheardPoll: unheardPoll, limit: subscriptionBuffer,
		wake: make(chan struct{}, 1), heard: make(chan struct{}, 1),
		byRun: map[store.RunKey]map[*Subscription]struct{}{}, global: map[*Subscription]struct{}{},
	}
	for _, o := range opts {
		o(h)
	}
	actions.OnCommit(h.wakeUp)
	return h
}

// wakeUp says something was committed; cheap and non-blocking.
func (h *Hub) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Listening reports whether the hub hears the database's notifications of
// commits (PostgreSQL, its listener connected): other replicas' changes
// then reach it at once, not at the next poll.
func (h *Hub) Listening() bool { return h.listening.Load() }

// Stats reports how many changes the hub dispatched, by cause.
func (h *Hub) Stats() HubStats {
	return HubStats{Local: h.stats[causeLocal].Load(), Notified: h.stats[causeNotified].Load(), Polled: h.stats[causePolled].Load(),
		Offered: h.offered.Load()}
}

// Start fixes where dispatching begins: the change log's current version.
// Call it before anything can subscribe (the manager does, before it
// serves): Subscribe promises every change committed after it returns, and
// a change committed between a Subscribe and a later Start would be skipped.
// Run calls it when it was not called.
func (h *Hub) Start(ctx context.Context) error {
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	if started {
		return nil
	}
	rv, err := h.actions.CurrentVersion(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if !h.started {
		h.last, h.started = rv, true
		h.dispatched.Store(rv)
	}
	h.mu.Unlock()
	return nil
}

// Run dispatches changes until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	if err := h.Start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { h.listen(ctx) })
	defer wg.Wait()
	t := time.NewTimer(h.unheardPoll)
	defer t.Stop()
	for {
		period := h.unheardPoll
		if h.listening.Load() {
			period = h.poll
		}
		t.Reset(period)
		var cause int
		select {
		case <-ctx.Done():
			h.closeAll()
			return nil
		case <-h.wake:
			cause = causeLocal
		case <-h.heard:
			cause = causeNotified
		case <-t.C:
			cause = causePolled
		}
		if err := h.dispatch(ctx, cause); err != nil && ctx.Err() == nil {
			h.log.Warn("reading the change log", "err", err)
		}
	}
}

// listen keeps a LISTEN on the database's change notifications, if it has
// them, reconnecting with a growing pause when the connection is lost.
// Every (re)connect dispatches once: a commit notified while the listener
// was down would otherwise wait for the poll.
func (h *Hub) listen(ctx context.Context) {
	pause := time.Second
	for {
		err := h.actions.Listen(ctx, func() {
			h.listening.Store(true)
			pause = time.Second
			h.wakeUp()
		}, h.notified)
		h.listening.Store(false)
		if errors.Is(err, db.ErrNoNotifications) || ctx.Err() != nil {
			return
		}
		h.log.Warn("not hearing other replicas' changes; polling every second until the listener reconnects", "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxReconnect)
	}
}

// notified handles a notification: its payload is the highest version the
// notifying statement appended, so one this hub dispatched already (its
// own writes, mostly) needs no read.
func (h *Hub) notified(payload string) {
	if v, err := strconv.ParseInt(payload, 10, 64); err == nil && v <= h.dispatched.Load() {
		return
	}
	select {
	case h.heard <- struct{}{}:
	default:
	}
}

// dispatch hands every change after h.last to its subscribers, counting
// them under what woke the hub (before handing them over, so a watcher
// that got a change sees it counted).
func (h *Hub) dispatch(ctx context.Context, cause int) error {
	for {
		h.mu.Lock()
		last := h.last
		h.mu.Unlock()
		changes, err := h.actions.ChangeFeed(ctx, last, store.MaxPageSize)
		if err != nil || len(changes) == 0 {
			return err
		}
		h.stats[cause].Add(int64(len(changes)))
		h.mu.Lock()
		for _, c := range changes {
			run := h.byRun[c.Key.RunKey]
			h.offered.Add(int64(len(h.global) + len(run)))
			for s := range h.global {
				if s.filter.match(c) {
					s.send(c)
				}
			}
			for s := range run {
				if s.filter.match(c) {
					s.send(c)
				}
			}
		}
		h.last = changes[len(changes)-1].ResourceVersion
		h.dispatched.Store(h.last)
		h.mu.Unlock()
	}
}

// Subscribe registers a watcher. Every change committed after Subscribe
// returns is delivered (at least once); take the snapshot after subscribing.
func (h *Hub) Subscribe(f Filter) *Subscription {
	c := make(chan store.Change)
	s := &Subscription{C: c, c: c, filter: f, hub: h, ready: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	h.add(s)
	h.mu.Unlock()
	go s.pump()
	return s
}

// add and remove run under h.mu.
func (h *Hub) add(s *Subscription) {
	if s.filter.run == nil {
		h.global[s] = struct{}{}
		return
	}
	subs := h.byRun[*s.filter.run]
	if subs == nil {
		subs = map[*Subscription]struct{}{}
		h.byRun[*s.filter.run] = subs
	}
	subs[s] = struct{}{}
}

func (h *Hub) remove(s *Subscription) {
	if s.filter.run == nil {
		delete(h.global, s)
		return
	}
	subs := h.byRun[*s.filter.run]
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.byRun, *s.filter.run)
	}
}

// send runs under h.mu; it never blocks the dispatcher: the change joins
// the subscription's queue, which its pump hands to C.
func (s *Subscription) send(c store.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if len(s.queue) >= s.hub.limit {
		// The watcher resyncs from a snapshot: the backlog is of no use.
		s.overflowed, s.closed, s.queue = true, true, nil
		s.hub.remove(s)
	} else {
		if s.queue == nil {
			s.queue, s.spare = s.spare[:0], nil
		}
		s.queue = append(s.queue, c)
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// pump hands the queued changes to C in order until the subscription
// closes; it closes C.
func (s *Subscription) pump() {
	defer close(s.c)
	for {
		s.mu.Lock()
		batch, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		if closed {
			return
		}
		for i := range batch {
			select {
			case s.c <- batch[i]:
				batch[i] = store.Change{} // let the row go
			case <-s.done:
				return
			}
		}
		if batch != nil {
			s.mu.Lock()
			s.spare = batch
			s.mu.Unlock()
		}
		select {
		case <-s.ready:
		case <-s.done:
			return
		}
	}
}

// Overflowed reports whether C was closed because the watcher fell behind.
func (s *Subscription) Overflowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflowed
}

// Close unregisters the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	s.hub.remove(s)
	s.hub.mu.Unlock()
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.queue = nil
	}
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	var subs []*Subscription
	for s := range h.global {
		subs = append(subs, s)
	}
	for _, run := range h.byRun {
		for s := range run {
			subs = append(subs, s)
		}
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
}

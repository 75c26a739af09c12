package runstate

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fmgr.dev/internal/store"
)

// Hub fans the change log out to watchers. One dispatcher reads change_log
// once per wake-up (a local write's Notify, or a poll that also catches
// writes made by other replicas) and hands each change to the subscribers
// whose filter matches, so watchers never query the log themselves.
type Hub struct {
	actions *store.Actions
	log     *slog.Logger
	poll    time.Duration

	wake chan struct{}

	mu      sync.Mutex
	started bool  // last is set: Start ran
	last    int64 // highest resource version dispatched
	subs    map[*Subscription]struct{}
}

// Subscription receives the changes its filter selects. When the subscriber
// falls too far behind, C is closed and Overflowed reports true: the watcher
// must take a fresh snapshot (resync) rather than silently miss changes.
type Subscription struct {
	C      <-chan store.Change
	c      chan store.Change
	filter func(store.Change) bool
	hub    *Hub

	mu         sync.Mutex
	closed     bool
	overflowed bool
}

const subscriptionBuffer = 4096

// NewHub builds a hub over the change log; Run dispatches.
func NewHub(actions *store.Actions, log *slog.Logger) *Hub {
	return &Hub{actions: actions, log: log, poll: time.Second, wake: make(chan struct{}, 1), subs: map[*Subscription]struct{}{}}
}

// Notify says something was committed; cheap and non-blocking.
func (h *Hub) Notify() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends.
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
	}
	h.mu.Unlock()
	return nil
}

// Run dispatches changes until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	if err := h.Start(ctx); err != nil {
		return err
	}
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.closeAll()
			return nil
		case <-h.wake:
		case <-t.C:
		}
		if err := h.dispatch(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("reading the change log", "err", err)
		}
	}
}

func (h *Hub) dispatch(ctx context.Context) error {
	for {
		h.mu.Lock()
		last := h.last
		h.mu.Unlock()
		changes, err := h.actions.ChangesSince(ctx, last, 1000)
		if err != nil || len(changes) == 0 {
			return err
		}
		h.mu.Lock()
		for _, c := range changes {
			for s := range h.subs {
				if s.filter(c) {
					s.send(c)
				}
			}
		}
		h.last = changes[len(changes)-1].ResourceVersion
		h.mu.Unlock()
	}
}

// Subscribe registers a watcher. Every change committed after Subscribe
// returns is delivered (at least once); take the snapshot after subscribing.
func (h *Hub) Subscribe(filter func(store.Change) bool) *Subscription {
	c := make(chan store.Change, subscriptionBuffer)
	s := &Subscription{C: c, c: c, filter: filter, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// ForRun selects the changes of the action rows of one run (lists and
// children show rows, not history).
func ForRun(run store.RunKey) func(store.Change) bool {
	return func(c store.Change) bool { return c.Kind == store.KindAction && c.Key.RunKey == run }
}

// ForAction selects the changes of one action, its recorded events included.
func ForAction(key store.ActionKey) func(store.Change) bool {
	return func(c store.Change) bool { return c.Key == key }
}

// send runs under h.mu; it never blocks the dispatcher.
func (s *Subscription) send(c store.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.c <- c:
	default:
		s.overflowed = true
		s.closed = true
		close(s.c)
		delete(s.hub.subs, s)
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
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.c)
	}
	s.mu.Unlock()
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
}

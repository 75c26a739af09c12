package attempt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/store"
)

// What follows a recorded decision, the same for every driver: the
// attempt's slot is freed, a retry waits out its backoff before the driver
// looks at the action again, and an action that ended no longer waits for
// anything while its unfinished descendants are aborted. The driver is told
// only what is its own to do (Options.Requeue, Options.Ended).

// AfterRecord acts on dec, just recorded for a (a as written).
func (c *Core) AfterRecord(ctx context.Context, a *store.Action, dec machine.Decision) {
	key := a.ActionKey
	switch dec := dec.(type) {
	case *machine.Retry:
		c.requeueAll(c.opts.Slots.Release(key))
		if dec.Delay > 0 {
			c.mu.Lock()
			c.notBefore[key] = time.Now().Add(dec.Delay)
			c.mu.Unlock()
		}
		c.opts.Requeue(key, dec.Delay)
	case *machine.Terminal:
		c.requeueAll(c.opts.Slots.Release(key))
		c.Forget(key)
		c.opts.Ended(key)
		if err := c.AbortDescendants(ctx, a); err != nil {
			c.opts.Log.Warn("aborting the children of an ended action", "action", key.String(), "err", err)
		}
	}
}

// requeueAll has the driver look at keys now: a slot freed for them.
func (c *Core) requeueAll(keys []store.ActionKey) {
	for _, k := range keys {
		c.opts.Requeue(k, 0)
	}
}

// Backoff is how long key's next attempt still waits for its retry's
// backoff; 0 once it may start. A backoff that passed is forgotten.
func (c *Core) Backoff(key store.ActionKey) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	nb, ok := c.notBefore[key]
	if !ok {
		return 0
	}
	left := time.Until(nb)
	if left <= 0 {
		delete(c.notBefore, key)
		return 0
	}
	return left
}

// Forget drops what the core keeps for key, an action that ended: its
// place among those waiting for a slot, its retry's backoff, a condition's
// deadline timer.
func (c *Core) Forget(key store.ActionKey) {
	c.opts.Slots.Forget(key)
	c.mu.Lock()
	delete(c.notBefore, key)
	if w, ok := c.wakes[key]; ok {
		w.timer.Stop()
		delete(c.wakes, key)
	}
	c.mu.Unlock()
}

// AbortDescendants aborts the unfinished descendants of a terminal action:
// a parent that ended no longer waits for them.
func (c *Core) AbortDescendants(ctx context.Context, a *store.Action) error {
	err := store.EachAction(store.MaxPageSize, func(p store.Page) ([]store.Action, string, error) {
		return c.state.ListChildren(ctx, a.ActionKey, p)
	}, func(kid *store.Action) error {
		if kid.Phase.Terminal() {
			return nil
		}
		reason := fmt.Sprintf("parent action %s ended %s", a.Name, a.Phase)
		if err := c.state.Abort(ctx, a.ActionKey, reason, ""); err != nil {
			return err
		}
		return errStop // one abort covers every descendant
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// scanPage is how many unfinished actions a scan reads at once.
const scanPage = 500

// Scan calls fn for every action, of every run, that has not ended: a
// driver's look at everything when it takes the executor lease, and
// whenever it may have missed news.
func (c *Core) Scan(ctx context.Context, fn func(*store.Action)) error {
	return store.EachAction(scanPage, func(p store.Page) ([]store.Action, string, error) {
		return c.state.ListUnfinished(ctx, p)
	}, func(a *store.Action) error {
		fn(a)
		return nil
	})
}

// errStop ends a store.EachAction early without an error.
var errStop = errors.New("stop")

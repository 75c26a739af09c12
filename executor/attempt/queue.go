package attempt

import (
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/store"
)

// queueOf is the configured queue a is on (the zero Queue for none, or
// for a queue no longer configured: its limits are gone with it).
func (c *Core) queueOf(a *store.Action) config.Queue {
	q, _ := c.state.Queues().Get(a.Queue)
	return q
}

// Ask is what the attempt asks Slots for: its parent, its run's
// max_action_concurrency and its queue's limits.
func (l *Launch) Ask() Ask {
	ask := AskOf(l.Action)
	ask.RunLimit = l.ConcurrencyLimit
	ask.QueueActions = l.Queue.MaxActionConcurrency
	ask.QueueRuns = l.Queue.MaxRunConcurrency
	return ask
}

// AskOf is the part of an Ask an action carries itself: its parent and
// its queue. Enough for Slots.Hold, which counts an attempt found running
// whatever the limits say.
func AskOf(a *store.Action) Ask {
	ask := Ask{Queue: a.Queue}
	if a.ParentName != nil {
		ask.Parent = *a.ParentName
	}
	return ask
}

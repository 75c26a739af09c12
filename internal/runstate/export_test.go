package runstate

import "context"

// SetSubscriptionLimit lowers how far a subscriber of h may fall behind,
// for tests that make a watcher overflow without making 65,536 changes.
func SetSubscriptionLimit(h *Hub, n int) {
	h.mu.Lock()
	h.limit = n
	h.mu.Unlock()
}

// Dispatch hands the changes h has not dispatched yet to its subscribers,
// for tests whose hub does not run (statetest.Options.ManualHub).
func Dispatch(ctx context.Context, h *Hub) error { return h.dispatch(ctx, causePolled) }

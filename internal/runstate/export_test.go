package runstate

// SetSubscriptionLimit lowers how far a subscriber of h may fall behind,
// for tests that make a watcher overflow without making 65,536 changes.
func SetSubscriptionLimit(h *Hub, n int) {
	h.mu.Lock()
	h.limit = n
	h.mu.Unlock()
}

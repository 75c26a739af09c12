package store

// QueuedWrites is how many action writes wait for s's committer (s over a
// pool), for tests that line writers up behind a batch.
func QueuedWrites(s *Store) int {
	c := s.w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// ExecIn runs a statement in the transaction of tx (a Store InTx hands
// out), for tests that need a write the repositories do not make.
func ExecIn(tx *Store, sql string, args ...any) error { return tx.db.Exec(sql, args...).Error }

// SetDeleteChunk makes DeleteRun delete n actions per transaction until
// the test ends.
func SetDeleteChunk(t interface{ Cleanup(func()) }, n int) {
	old := deleteChunk
	deleteChunk = n
	t.Cleanup(func() { deleteChunk = old })
}

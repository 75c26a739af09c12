package server

import (
	"context"
	"slices"
	"sync"
)

// WorkFunc is a background worker: it runs until ctx ends and then returns.
type WorkFunc func(ctx context.Context) error

type namedWorker struct {
	name string
	run  WorkFunc
}

// AddWorker registers run to start with StartWorkers. Workers start only
// once the server listens because some need the address it advertises
// (the executor tells task processes where the manager is).
func (s *Server) AddWorker(name string, run WorkFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers = append(s.workers, namedWorker{name, run})
}

// DropWorker unregisters the worker named name before StartWorkers and
// reports whether there was one. It exists for harnesses that serve
// everything but must not run one worker (the manager's fuzz test never
// lets the executor run the commands it generates).
func (s *Server) DropWorker(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.workers)
	s.workers = slices.DeleteFunc(s.workers, func(w namedWorker) bool { return w.name == name })
	return len(s.workers) < n
}

// StartWorkers runs the registered workers and registers one closer that
// cancels them and waits for them to return. It is registered last, so it
// runs first at shutdown: workers stop before the resources they use (the
// database, the storage) are closed.
func (s *Server) StartWorkers() {
	s.mu.Lock()
	workers := append([]namedWorker(nil), s.workers...)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if err := w.run(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("background worker stopped", "worker", w.name, "err", err)
			}
		})
	}
	s.AddCloser("workers", func(stop context.Context) error {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-stop.Done():
			return stop.Err()
		}
	})
}

package server

import (
	"context"
	"testing"
	"time"

	"fmgr.dev/internal/config"
)

// StartWorkers runs every registered worker but a dropped one, and Close
// cancels them and returns only after each has returned.
func TestWorkersRunUntilClose(t *testing.T) {
	s := New(config.Default().Server, nil)
	started := make(chan string, 2)
	returned := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		s.AddWorker(name, func(ctx context.Context) error {
			started <- name
			<-ctx.Done()
			returned <- name
			return nil
		})
	}
	s.AddWorker("dropped", func(context.Context) error {
		t.Error("a dropped worker ran")
		return nil
	})
	if !s.DropWorker("dropped") {
		t.Fatal("DropWorker found no worker named dropped")
	}
	if s.DropWorker("dropped") {
		t.Error("DropWorker removed the same worker twice")
	}
	s.StartWorkers()
	deadline := time.After(time.Minute)
	for range 2 {
		select {
		case <-started:
		case <-deadline:
			t.Fatal("workers did not start")
		}
	}
	if len(returned) != 0 {
		t.Fatal("a worker returned before Close")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(returned) != 2 {
		t.Fatalf("Close returned with %d of 2 workers stopped", len(returned))
	}
}

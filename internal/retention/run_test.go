package retention_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/retention"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

// The periodic collector collects only while this manager holds the
// executor lease: asked many times while it does not, it deletes nothing;
// once it does, the expired run goes.
func TestRunOnlyOnTheLeaseHolder(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		w := newWorld(t, g)
		w.create("ra", "env.a", "uploads/_/p/development/AAAA/fastA.tar.gz", 7)
		w.end("ra", time.Now().Add(-800*time.Hour))
		c := retention.New(w.st, w.blobs, policy(), nil, nil)

		var holder atomic.Bool
		var asked atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- c.Run(ctx, 5*time.Millisecond, func() bool { asked.Add(1); return holder.Load() })
		}()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		testkit.Eventually(t, "the collector to ask for the lease 20 times", 30*time.Second, func() bool { return asked.Load() >= 20 })
		if _, err := w.state.Get(context.Background(), key("ra").Action(store.RootName)); err != nil {
			t.Fatalf("a standby collected: %v", err)
		}
		holder.Store(true)
		testkit.Eventually(t, "the lease holder to collect the run", 30*time.Second, func() bool {
			_, err := w.state.Get(context.Background(), key("ra").Action(store.RootName))
			return errors.Is(err, errs.ErrNotFound)
		})
	})
}

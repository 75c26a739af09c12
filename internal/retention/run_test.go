package retention_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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

// With a notice, the first passes on a database delete nothing and say
// what they will delete and from when; once the notice has passed, the
// run goes. A second collector on the same database (another manager)
// counts the notice from the first one's first pass.
func TestNoticeBeforeTheFirstDeletion(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		w := newWorld(t, g)
		w.create("ra", "env.a", "uploads/_/p/development/AAAA/fastA.tar.gz", 7)
		w.end("ra", time.Now().Add(-800*time.Hour))
		cfg := policy()
		cfg.Notice = time.Hour
		var logs testkit.Buffer
		c := retention.New(w.st, w.blobs, cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
		var clock atomic.Int64
		start := time.Now()
		clock.Store(start.UnixNano())
		c.SetClock(func() time.Time { return time.Unix(0, clock.Load()) })

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, 5*time.Millisecond, func() bool { return true }) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		select {
		case <-logs.AwaitText("runs=1"):
		case <-time.After(time.Minute):
			t.Fatalf("no notice in the log:\n%s", logs.String())
		}
		if !strings.Contains(logs.String(), "will be deleted from "+start.Add(time.Hour).UTC().Format("2006-01-02T15")) {
			t.Errorf("the notice does not say from when:\n%s", logs.String())
		}
		if _, err := w.state.Get(context.Background(), key("ra").Action(store.RootName)); err != nil {
			t.Fatalf("the run was collected during the notice: %v", err)
		}
		// Another manager's collector agrees on when the notice ends.
		from, err := w.st.Retention.NoticeFrom(context.Background(), start.Add(30*time.Minute))
		if err != nil || from.Sub(start).Abs() > time.Second {
			t.Fatalf("the notice began at %v (%v), want the first pass's %v", from, err, start)
		}

		clock.Store(start.Add(61 * time.Minute).UnixNano())
		testkit.Eventually(t, "the run to be collected once the notice passed", 30*time.Second, func() bool {
			_, err := w.state.Get(context.Background(), key("ra").Action(store.RootName))
			return errors.Is(err, errs.ErrNotFound)
		})
	})
}

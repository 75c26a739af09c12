package local

import (
	"context"
	"errors"
	"time"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/logship"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// shipLog ships the log of attempt n of a to storage beside its outputs
// (package logship), so that the log outlives the attempt's directory and
// this manager: while it runs, chunk by chunk, and once ended reports that
// its end is recorded, whole, after one last read for what recording
// added. The shipper reads the log as TailLogs does, from the attempt's
// directory; a recovered attempt (ended always true) has its log stored
// from what is left of it, here and in storage.
func (d *Driver) shipLog(a *store.Action, n int32, ended func() bool) {
	blobs := d.state.Blobs()
	if blobs == nil {
		return
	}
	dir, err := blobs.Key(runlayout.AttemptLogDir(a.RunOutputBase, a.Name, uint32(n)))
	if err != nil {
		// A run_base_dir outside storage: its log stays local.
		d.log.Debug("attempt log not shipped: the run's base is outside storage", "action", a.ActionKey.String(), "attempt", n)
		return
	}
	sh := &logship.Shipper{Store: blobs, Dir: dir, FlushEvery: d.logFlush, Metrics: d.metrics.logs, Log: d.log}
	src := func(ctx context.Context, emit func([]*dataplane.LogLine) error) error {
		return d.Logs(ctx, a.ActionKey, n, true, emit)
	}
	ctx := d.workCtx
	d.shippers.Add(1)
	go func() {
		defer d.shippers.Done()
		if err := sh.Run(ctx, src, func(context.Context) bool { return ended() }); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Warn("shipping an attempt's log", "action", a.ActionKey.String(), "attempt", n, "error", err)
		}
	}()
}

// recorded reports that e's end is recorded: its entry is gone.
func (d *Driver) recorded(e *ownAttempt) func() bool {
	return func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.running[e.key] != e
	}
}

// finalShipWait bounds how long a graceful stop waits for final logs.
const finalShipWait = 30 * time.Second

// stopShipping lets the shippers of ended attempts finish their final
// objects (graceful: every attempt has ended by now) until ctx ends, then
// stops the rest, which store what they hold as a last chunk.
func (d *Driver) stopShipping(ctx context.Context, graceful bool) {
	if graceful {
		done := make(chan struct{})
		go func() { d.shippers.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		case <-time.After(finalShipWait):
		}
	}
	d.stopWork()
	d.shippers.Wait()
}

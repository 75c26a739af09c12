package kube

import (
	"context"
	"errors"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/logship"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// shipKey is one attempt whose log a shipper of this driver ships.
type shipKey struct {
	key store.ActionKey
	n   int32
}

// shipLog ships the log of a's current attempt to storage beside its
// outputs (package logship), unless a shipper of it runs here already: its
// Pod's log, chunk by chunk while the container runs, then whole once the
// attempt's end is recorded, so that the log outlives the Pod. The lease
// holder ships (it reconciles): a shipper stops, storing what it holds,
// when this replica loses the lease, and the new holder's goes on after
// what is stored. The stored log is capped at config.DefaultMaxLogBytes
// (head, marker, tail), as the local executor's are by default.
func (d *Driver) shipLog(a *store.Action) {
	blobs := d.state.Blobs()
	if blobs == nil {
		return
	}
	dir, err := blobs.Key(runlayout.AttemptLogDir(a.RunOutputBase, a.Name, uint32(a.Attempts)))
	if err != nil {
		return // a run_base_dir outside storage: the log stays with its Pod
	}
	k := shipKey{key: a.ActionKey, n: a.Attempts}
	d.mu.Lock()
	parent := d.shipCtx
	if parent == nil || d.shipping[k] {
		d.mu.Unlock()
		return
	}
	d.shipping[k] = true
	d.shippers.Add(1)
	d.mu.Unlock()

	ctx, cancel := context.WithCancel(parent)
	holder := func() bool {
		if d.lease.Fence() == 0 {
			cancel() // the new holder ships it
			return false
		}
		return true
	}
	src := func(ctx context.Context, emit func([]*dataplane.LogLine) error) error {
		if !holder() {
			return ctx.Err()
		}
		return d.Logs(ctx, k.key, k.n, true, func(lines []*dataplane.LogLine) error {
			if !holder() {
				return ctx.Err()
			}
			return emit(lines)
		})
	}
	ended := func(ctx context.Context) bool {
		cur, err := d.state.Get(ctx, k.key)
		if errors.Is(err, errs.ErrNotFound) {
			return true
		}
		return err == nil && (cur.Attempts != k.n || cur.Phase.Terminal())
	}
	sh := &logship.Shipper{Store: blobs, Dir: dir, MaxBytes: config.DefaultMaxLogBytes, FlushEvery: d.logFlush, Metrics: d.metrics.logs, Log: d.log}
	go func() {
		defer func() {
			cancel()
			d.mu.Lock()
			delete(d.shipping, k)
			d.mu.Unlock()
			d.shippers.Done()
		}()
		if err := sh.Run(ctx, src, ended); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Warn("shipping an attempt's log", "action", k.key.String(), "attempt", k.n, "error", err)
		}
	}()
}

// startShipping lets shipLog start shippers, which live until ctx ends;
// the returned function waits for them (each stores what it holds first).
func (d *Driver) startShipping(ctx context.Context) (wait func()) {
	d.mu.Lock()
	d.shipCtx = ctx
	if d.shipping == nil {
		d.shipping = map[shipKey]bool{}
	}
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		d.shipCtx = nil
		d.mu.Unlock()
		d.shippers.Wait()
	}
}

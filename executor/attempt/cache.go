package attempt

import (
	"context"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The cache step of an action's life: looked up (and reserved) before an
// attempt starts, stored and released when the action ends.

// planCache asks the cache before a's attempt starts. done says the plan is
// decided: a hit (the action succeeds with the cached outputs, no attempt
// runs) or a wait for another action's reservation.
func (c *Core) planCache(ctx context.Context, a *store.Action, spec *task.TaskSpec, ri *runInfo) (Plan, bool, error) {
	if c.opts.Cache == nil || !Discoverable(spec) {
		return Plan{}, false, nil
	}
	chk, err := c.opts.Cache.Check(ctx, CacheQuery{Action: a, Spec: spec, Overwrite: ri.overwriteCache, Scope: ri.cacheScope})
	if err != nil {
		return Plan{}, false, err
	}
	n := uint32(a.Attempts)
	switch {
	case chk.HitURI != "":
		return Plan{Event: machine.Succeeded{Attempt: n}, Spec: spec, Record: Record{OutDir: chk.HitURI, Cache: chk.Status}}, true, nil
	case chk.Wait != "":
		return Plan{Event: machine.Wait{Attempt: n, Reason: chk.Wait}, Spec: spec, RetryAfter: chk.RetryAfter}, true, nil
	}
	return Plan{}, false, nil
}

// startCacheStatus is the cache status of an attempt that starts: the
// lookup missed, or the run skipped it to overwrite.
func (c *Core) startCacheStatus(ctx context.Context, a *store.Action, spec *task.TaskSpec) *int32 {
	if c.opts.Cache == nil || !Discoverable(spec) {
		return nil
	}
	st := core.CatalogCacheStatus_CACHE_MISS
	if ri, err := c.run(ctx, a.RunKey); err == nil && ri.overwriteCache {
		st = core.CatalogCacheStatus_CACHE_SKIPPED
	}
	v := int32(st)
	return &v
}

// finishCache is the cache's part of a's end in phase p: a success's
// outputs are stored and the action's reservations released (on every
// ending, failures and aborts included). It returns the cache status to
// record, nil to leave it. A spec that was not loaded (nil) may still be a
// serializable task's: its reservations are released all the same.
func (c *Core) finishCache(ctx context.Context, a *store.Action, spec *task.TaskSpec, p phase.Phase, rec Record) *int32 {
	st := rec.Cache
	if c.opts.Cache != nil && st != core.CatalogCacheStatus_CACHE_HIT && (spec == nil || Discoverable(spec)) {
		q := CacheQuery{Action: a, Spec: spec}
		if ri, err := c.run(ctx, a.RunKey); err == nil {
			q.Overwrite, q.Scope = ri.overwriteCache, ri.cacheScope
		}
		if s := c.opts.Cache.Finish(ctx, q, p == phase.Succeeded, rec.OutDir); s != 0 {
			st = s
		}
	}
	if st == 0 {
		return nil
	}
	v := int32(st)
	return &v
}

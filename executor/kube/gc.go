package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
)

// Garbage collection of ended TaskActions: the database keeps the action's
// history, so a TaskAction is only needed while it runs and for a while
// after (kubectl get taskactions, the Pod's logs). The sweep reads the
// informer's cache (no List against the API server) and tells an ended
// TaskAction's age from when its Succeeded or Failed condition became
// True, so ending an action costs no extra write for a label.

// collectGarbage sweeps at start and then every GCInterval while this
// replica holds the lease.
func (d *Driver) collectGarbage(ctx context.Context) {
	if d.cfg.GCInterval <= 0 {
		return
	}
	for {
		if d.lease.Fence() != 0 {
			if n, err := d.sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
				d.log.Warn("garbage collection of ended TaskActions", "err", err)
			} else if n > 0 {
				d.log.Info("deleted ended TaskActions", "count", n, "olderThan", d.cfg.GCTTL)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.cfg.GCInterval):
		}
	}
}

// sweep deletes the TaskActions that ended more than GCTTL before now. A
// child is left to its root: deleting the root deletes the tree.
func (d *Driver) sweep(ctx context.Context, now time.Time) (int, error) {
	var list v1.TaskActionList
	if err := d.client.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		ta := &list.Items[i]
		ended, ok := endedAt(ta)
		if !ok || ta.DeletionTimestamp != nil || now.Sub(ended) < d.cfg.GCTTL {
			continue
		}
		if !ta.IsRoot() && len(ta.OwnerReferences) > 0 {
			continue
		}
		if err := d.client.Delete(ctx, ta, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return n, err
		}
		n++
		d.metrics.collected.Inc()
	}
	return n, nil
}

// endedAt is when ta's action ended; ok is false while it has not.
func endedAt(ta *v1.TaskAction) (time.Time, bool) {
	for _, c := range []string{v1.ConditionSucceeded, v1.ConditionFailed} {
		if cond := ta.Condition(c); cond != nil && cond.Status == "True" {
			return cond.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

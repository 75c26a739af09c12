package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Reconcile brings one TaskAction (and the action it stands for) a step
// closer to where it should be: read, decide with the attempt core, write
// the database, then at most one status write.
func (d *Driver) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if d.lease.Fence() == 0 || d.lease.Paused() {
		return ctrl.Result{}, nil // standby: the holder reconciles, and scans everything when it takes over
	}
	d.metrics.reconciles.Inc()
	ta := &v1.TaskAction{}
	if err := d.client.Get(ctx, req.NamespacedName, ta); apierrors.IsNotFound(err) {
		ta = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	var key store.ActionKey
	if ta != nil {
		key = keyOf(ta)
		if d.nameOf(key) != req.NamespacedName {
			return ctrl.Result{}, d.misnamed(ctx, ta, key)
		}
	} else if k, ok := d.keyFor(req.NamespacedName); ok {
		key = k
	} else {
		return ctrl.Result{}, nil // gone, and no action to stand for
	}
	a, err := d.state.Get(ctx, key)
	if errors.Is(err, errs.ErrNotFound) {
		d.forget(req.NamespacedName)
		if ta == nil {
			return ctrl.Result{}, nil
		}
		return d.adopt(ctx, ta)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if a.ActionType == store.ActionTypeCondition {
		// A condition has no TaskAction and runs nothing: the core records
		// its abort or its timeout, and wakes it at its deadline.
		if a.Phase.Terminal() {
			d.forget(req.NamespacedName)
		}
		err = d.core.Condition(ctx, a)
		if errors.Is(err, errs.ErrConflict) {
			return ctrl.Result{Requeue: true}, nil
		}
		if errors.Is(err, attempt.ErrNotWriter) || errors.Is(err, store.ErrFenced) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	var res ctrl.Result
	switch {
	case ta == nil:
		res, err = d.withoutObject(ctx, req.NamespacedName, a)
	case ta.DeletionTimestamp != nil:
		res, err = d.finalize(ctx, ta, a)
	default:
		res, err = d.step(ctx, ta, a)
	}
	if a.Phase.Terminal() {
		d.forget(req.NamespacedName)
	}
	if errors.Is(err, errs.ErrConflict) {
		return ctrl.Result{Requeue: true}, nil // the row moved meanwhile: read it again
	}
	if errors.Is(err, attempt.ErrNotWriter) || errors.Is(err, store.ErrFenced) {
		return ctrl.Result{}, nil // lost the lease mid-pass: nothing was written
	}
	return res, err
}

// withoutObject handles an action whose TaskAction does not exist: a new
// action gets one; an unfinished one whose TaskAction vanished without
// going through the finalizer (not an abort) is retried as a new attempt,
// visibly.
func (d *Driver) withoutObject(ctx context.Context, name types.NamespacedName, a *store.Action) (ctrl.Result, error) {
	switch {
	case a.Phase.Terminal():
		d.forget(name)
		return ctrl.Result{}, nil
	case a.AbortRequestedAt != nil:
		d.forget(name)
		_, err := d.apply(ctx, nil, a, nil, machine.AbortRequested{Reason: attempt.AbortReason(a)}, attempt.Record{})
		return ctrl.Result{}, err
	case a.Phase.Active():
		msg := fmt.Sprintf("the TaskAction %s of attempt %d was deleted outside the manager; the action runs again", name, a.Attempts)
		d.log.Warn("an action's TaskAction vanished", "action", a.ActionKey.String(), "attempt", a.Attempts)
		if _, err := d.apply(ctx, nil, a, nil, machine.Orphaned{Attempt: uint32(a.Attempts), Message: msg}, attempt.Record{}); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, d.create(ctx, name, a)
}

// step drives an action whose TaskAction exists.
func (d *Driver) step(ctx context.Context, ta *v1.TaskAction, a *store.Action) (ctrl.Result, error) {
	var res ctrl.Result
	var err error
	writeStatus := true
	switch {
	case a.Phase.Terminal():
		if a.Phase == phase.Aborted {
			err = d.deletePod(ctx, ta, a.Attempts)
		}
	case a.AbortRequestedAt != nil:
		if err = d.deletePod(ctx, ta, a.Attempts); err == nil {
			a, err = d.apply(ctx, ta, a, nil, machine.AbortRequested{Reason: attempt.AbortReason(a)}, attempt.Record{})
		}
	case a.Phase.Pending():
		var launched bool
		a, launched, res, err = d.launch(ctx, ta, a)
		// The Pod's events follow at once: showing Initializing would cost
		// a write that the next pass overwrites.
		writeStatus = !launched
	case a.Phase.Active():
		// Before watch, which may record the end: the log is shipped
		// once the attempt ran, however quickly it ended.
		d.shipLog(a)
		a, res, err = d.watch(ctx, ta, a)
		// Initializing lasts until the Pod's container starts; the status
		// says Queued until Executing rather than pay a write for it.
		writeStatus = a.Phase != phase.Initializing
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if writeStatus {
		if err := d.writeStatus(ctx, ta, a); err != nil {
			return ctrl.Result{}, err
		}
	}
	return res, nil
}

// apply records ev through the attempt core and acts on the decision; ta
// is nil for an action without a TaskAction (no Kubernetes Event then).
func (d *Driver) apply(ctx context.Context, ta *v1.TaskAction, a *store.Action, spec *task.TaskSpec, ev machine.Event, rec attempt.Record) (*store.Action, error) {
	updated, dec, err := d.write(ctx, a, spec, ev, rec)
	if err != nil {
		return a, err
	}
	d.core.AfterRecord(ctx, updated, dec)
	switch dec := dec.(type) {
	case *machine.Retry:
		d.warn(ta, "Retrying", fmt.Sprintf("attempt %d failed (%s); attempt %d follows", a.Attempts, dec.Cause.Message, dec.Attempt))
	case *machine.Terminal:
		d.metrics.ended.WithLabelValues(dec.Phase.String()).Inc()
		if dec.Phase != phase.Succeeded && dec.Error != nil {
			d.warn(ta, "Failed", dec.Error.Message)
		} else if dec.Phase == phase.Aborted {
			d.note(ta, "Aborted", dec.Reason)
		}
	}
	return updated, nil
}

// write records ev through the attempt core, remembering the version it
// wrote: the change feed then skips this driver's own writes (it is there
// for what other replicas change), which would only cost a reconcile that
// reads an informer cache lagging behind.
func (d *Driver) write(ctx context.Context, a *store.Action, spec *task.TaskSpec, ev machine.Event, rec attempt.Record) (*store.Action, machine.Decision, error) {
	updated, dec, err := d.core.Apply(ctx, a, spec, ev, rec)
	if err == nil && updated != a {
		d.own.add(updated.ResourceVersion)
	}
	return updated, dec, err
}

// writeStatus projects a onto ta's status and writes it when it changed,
// re-reading ta on a conflict.
//
// The informer's copy of ta may not show a status this driver wrote a
// moment ago (a reconcile triggered by the database's change feed can
// outrun it), so what was last written is remembered per TaskAction: the
// same projection is never written twice.
func (d *Driver) writeStatus(ctx context.Context, ta *v1.TaskAction, a *store.Action) error {
	now := time.Now()
	fp := fingerprint(a)
	d.mu.Lock()
	last, known := d.written[ta.UID]
	d.mu.Unlock()
	if known && last.fp == fp {
		return nil
	}
	if known {
		// Build on what this driver wrote last, not on a cached copy that
		// may predate it (which would also fail on its resource version).
		ta.ResourceVersion, ta.Status = last.rv, *last.status.DeepCopy()
	}
	if !project(ta, a, now) {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := d.client.Status().Update(ctx, ta)
		if apierrors.IsConflict(err) {
			fresh := &v1.TaskAction{}
			if gerr := d.reader.Get(ctx, client.ObjectKeyFromObject(ta), fresh); gerr != nil {
				return gerr
			}
			*ta = *fresh
			if !project(ta, a, now) {
				return nil // it shows this already
			}
		}
		return err
	})
	if err == nil {
		d.mu.Lock()
		if len(d.written) >= maxRemembered {
			clear(d.written)
		}
		d.written[ta.UID] = writtenStatus{fp: fp, rv: ta.ResourceVersion, status: *ta.Status.DeepCopy()}
		d.mu.Unlock()
	}
	return err
}

// writtenStatus is the status this driver last wrote to a TaskAction.
type writtenStatus struct {
	fp     string // fingerprint of the action it projects
	rv     string // the TaskAction's resource version after the write
	status v1.TaskActionStatus
}

// maxRemembered bounds the written-status memory; forgetting costs at most
// one redundant write per TaskAction.
const maxRemembered = 1 << 16

// fingerprint is what the projection of a depends on.
func fingerprint(a *store.Action) string {
	return fmt.Sprintf("%d/%d/%d/%x", a.Phase, a.Attempts, a.CacheStatus, a.ErrorInfo)
}

// finalize handles a TaskAction being deleted: deleting it aborts the
// action (and, through the database, its descendants, whose TaskActions
// the owner references delete too), then the finalizer goes.
func (d *Driver) finalize(ctx context.Context, ta *v1.TaskAction, a *store.Action) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ta, v1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if !a.Phase.Terminal() {
		if a.AbortRequestedAt == nil {
			if err := d.state.Abort(ctx, a.ActionKey, "its TaskAction was deleted", "kubernetes"); err != nil {
				return ctrl.Result{}, err
			}
			fresh, err := d.state.Get(ctx, a.ActionKey)
			if err != nil {
				return ctrl.Result{}, err
			}
			a = fresh
		}
		if err := d.deletePod(ctx, ta, a.Attempts); err != nil {
			return ctrl.Result{}, err
		}
		if _, err := d.apply(ctx, ta, a, nil, machine.AbortRequested{Reason: attempt.AbortReason(a)}, attempt.Record{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, d.removeFinalizer(ctx, ta)
}

func (d *Driver) removeFinalizer(ctx context.Context, ta *v1.TaskAction) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &v1.TaskAction{}
		if err := d.reader.Get(ctx, client.ObjectKeyFromObject(ta), fresh); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if !controllerutil.RemoveFinalizer(fresh, v1.Finalizer) {
			return nil
		}
		err := d.client.Update(ctx, fresh)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func (d *Driver) warn(ta *v1.TaskAction, reason, note string) {
	if ta != nil && d.events != nil {
		d.events.Eventf(ta, nil, corev1.EventTypeWarning, reason, reason, "%s", note)
	}
}

func (d *Driver) note(ta *v1.TaskAction, reason, note string) {
	if ta != nil && d.events != nil {
		d.events.Eventf(ta, nil, corev1.EventTypeNormal, reason, reason, "%s", note)
	}
}

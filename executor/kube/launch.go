package kube

// Launching an attempt as a Pod and following the Pod to its end.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// launch starts the current attempt of a pending action: the core plans
// it, the driver claims it and creates its Pod.
func (d *Driver) launch(ctx context.Context, ta *v1.TaskAction, a *store.Action) (*store.Action, bool, ctrl.Result, error) {
	if left := d.core.Backoff(a.ActionKey); left > 0 {
		return a, false, ctrl.Result{RequeueAfter: left}, nil
	}
	if a.ParentName != nil {
		parent, err := d.state.Get(ctx, a.RunKey.Action(*a.ParentName))
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return a, false, ctrl.Result{}, err
		}
		if err == nil && (parent.Phase.Terminal() || parent.AbortRequestedAt != nil) {
			// A child enqueued while its run was being aborted: abort it
			// (and anything under it); the next pass records ABORTED.
			return a, false, ctrl.Result{Requeue: true}, d.state.Abort(ctx, a.ActionKey, fmt.Sprintf("parent action %s ended", parent.Name), "")
		}
	}
	plan, err := d.plan(ctx, a)
	if err != nil {
		return a, false, ctrl.Result{}, err
	}
	if plan.Event != nil {
		a, err = d.apply(ctx, ta, a, plan.Spec, plan.Event, plan.Record)
		return a, false, ctrl.Result{RequeueAfter: plan.RetryAfter}, err
	}
	l := plan.Launch
	// The run's max_action_concurrency and the queue's limits (the cluster
	// schedules the rest).
	ok, why, wake := d.slots.Acquire(a.ActionKey, l.Ask())
	d.pokeAll(wake)
	if !ok {
		var res ctrl.Result
		if l.QueuedLeft > 0 {
			res.RequeueAfter = l.QueuedLeft // to time it out if it still waits then
		}
		if a.Phase == phase.Queued {
			a, err = d.apply(ctx, ta, a, plan.Spec, machine.Wait{Attempt: uint32(a.Attempts), Reason: why}, attempt.Record{})
		}
		return a, false, res, err
	}
	pod, err := d.buildPod(ctx, ta, l)
	if err != nil {
		a, err = d.apply(ctx, ta, a, plan.Spec, machine.Failed{Attempt: uint32(a.Attempts), Kind: machine.KindUser,
			Code: attempt.CodeLaunchFailed, Message: err.Error()}, attempt.Record{})
		return a, false, ctrl.Result{}, err
	}
	// Claim the attempt first: a restart finds it INITIALIZING and creates
	// the Pod (by its name, so never twice) if it is missing.
	if a, err = d.apply(ctx, ta, a, plan.Spec, machine.Start{Attempt: uint32(a.Attempts)}, attempt.Record{}); err != nil {
		return a, false, ctrl.Result{}, err
	}
	d.prepareOutputs(l.OutDir)
	if err := d.applySecret(ctx, addSecrets(pod, l)); err != nil {
		return d.podCreateFailed(ctx, ta, a, plan.Spec, err)
	}
	if err := d.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		d.releaseSecret(ctx, pod)
		return d.podCreateFailed(ctx, ta, a, plan.Spec, err)
	}
	d.metrics.podsCreated.Inc()
	d.log.Debug("attempt started", "action", a.ActionKey.String(), "attempt", a.Attempts, "pod", pod.Name)
	return a, true, d.timeoutCheck(a, plan.Spec, time.Now()), nil
}

// plan plans a's current attempt for a Pod: no host environment, the
// endpoint Pods reach the manager by.
func (d *Driver) plan(ctx context.Context, a *store.Action) (attempt.Plan, error) {
	endpoint := d.cfg.Endpoint
	if endpoint == "" {
		endpoint = d.endpoint()
	}
	return d.core.Plan(ctx, a, attempt.PlanOptions{Endpoint: endpoint,
		NoContainer: "the kubernetes executor runs container tasks (Python tasks and raw containers); no plugin handles this task type"})
}

// prepareOutputs creates an attempt's output directory on storage shared
// with the Pods, as the local driver does: the runtime writes into it
// without creating it.
func (d *Driver) prepareOutputs(outDir string) {
	if filepath.IsAbs(outDir) {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			d.log.Warn("creating an attempt's output directory", "dir", outDir, "err", err)
		}
	}
}

// podCreateFailed records a Pod the API server refused: a spec it calls
// invalid is the task's failure; anything else (quota, admission, an
// unreachable server) is the platform's, retried from the system budget.
func (d *Driver) podCreateFailed(ctx context.Context, ta *v1.TaskAction, a *store.Action, spec *task.TaskSpec, cerr error) (*store.Action, bool, ctrl.Result, error) {
	n := a.Attempts
	ev := machine.Event(attempt.PlatformFailure(n, "the Pod could not be created: "+cerr.Error()))
	if apierrors.IsInvalid(cerr) || apierrors.IsBadRequest(cerr) || apierrors.IsRequestEntityTooLargeError(cerr) {
		ev = machine.Failed{Attempt: uint32(n), Kind: machine.KindUser, Code: attempt.CodeLaunchFailed, Message: "the Pod was refused: " + cerr.Error()}
	}
	d.warn(ta, "PodCreateFailed", cerr.Error())
	a, err := d.apply(ctx, ta, a, spec, ev, attempt.Record{})
	return a, false, ctrl.Result{}, err
}

// watch follows the Pod of an active attempt and records what it shows.
func (d *Driver) watch(ctx context.Context, ta *v1.TaskAction, a *store.Action) (*store.Action, ctrl.Result, error) {
	n := a.Attempts
	d.slots.Hold(a.ActionKey, attempt.AskOf(a)) // running, so counted, also when found after a restart
	spec, err := d.core.Spec(ctx, a)
	if err != nil {
		var bad attempt.BadSpecError
		if !errors.As(err, &bad) {
			return a, ctrl.Result{}, err
		}
		spec = nil
	}
	pod := &corev1.Pod{}
	err = d.client.Get(ctx, types.NamespacedName{Namespace: ta.Namespace, Name: podName(ta, n)}, pod)
	if apierrors.IsNotFound(err) {
		// The cache may lag behind a Pod just created: ask the server.
		err = d.reader.Get(ctx, types.NamespacedName{Namespace: ta.Namespace, Name: podName(ta, n)}, pod)
	}
	if apierrors.IsNotFound(err) {
		if a.Phase == phase.Initializing {
			// Claimed, but the Pod was never created (the manager stopped
			// in between): create it now.
			return d.recreate(ctx, ta, a)
		}
		a, err = d.apply(ctx, ta, a, spec, machine.Orphaned{Attempt: uint32(n), Message: fmt.Sprintf(
			"the Pod of attempt %d was deleted while it ran; the action runs again", n)}, attempt.Record{})
		return a, ctrl.Result{}, err
	}
	if err != nil {
		return a, ctrl.Result{}, err
	}
	if a, err = d.reportPodEvents(ctx, a, pod); err != nil {
		return a, ctrl.Result{}, err
	}
	outDir := runstate.OutputDir(a, n)
	obs, exit, why := observe(pod)
	switch obs {
	case podWaiting:
		return a, d.timeoutCheck(a, spec, startedAt(pod)), d.timeoutIfDue(ctx, ta, a, spec, pod)
	case podBroken:
		_ = d.deletePod(ctx, ta, n)
		a, err = d.apply(ctx, ta, a, spec, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
			Code: attempt.CodeLaunchFailed, Message: "the task's container cannot start: " + why}, attempt.Record{})
		return a, ctrl.Result{}, err
	case podNotStarted:
		// The platform's failure, not the task's: retried from the system
		// budget. A waiting container is deleted, or the kubelet would go
		// on retrying it beside the next attempt.
		if err := d.deletePod(ctx, ta, n); err != nil {
			return a, ctrl.Result{}, err
		}
		a, err = d.apply(ctx, ta, a, spec, attempt.PlatformFailure(n, fmt.Sprintf("the Pod of attempt %d could not start the task's container: %s", n, why)), attempt.Record{})
		return a, ctrl.Result{}, err
	case podRunning:
		if a.Phase == phase.Initializing {
			rec := attempt.Record{Logs: true, LogLinks: d.logLinks(a.ActionKey, n, pod, spec)}
			if a, err = d.apply(ctx, ta, a, spec, machine.Running{Attempt: uint32(n)}, rec); err != nil {
				return a, ctrl.Result{}, err
			}
		}
		return a, d.timeoutCheck(a, spec, startedAt(pod)), d.timeoutIfDue(ctx, ta, a, spec, pod)
	}
	// The Pod ended: what it left in its output directory says how.
	d.releaseSecret(ctx, pod)
	res, err := d.core.Classify(ctx, spec, outDir, exit)
	if err != nil {
		return a, ctrl.Result{}, err
	}
	rec := attempt.Record{OutDir: outDir}
	if res.Document != nil {
		rec.ErrorURI = runlayout.JoinURI(outDir, runlayout.ErrorFile)
	}
	ev := res.Event(uint32(n))
	st := taskStatus(pod)
	if st != nil && st.State.Terminated != nil && (a.Phase == phase.Initializing || len(d.logTemplates) > 0) {
		// The task's container ran and ended: its log exists (it may have
		// ended before a reconcile saw it running), and the links are
		// recorded again with the Pod's finish time.
		rec.Logs, rec.LogLinks = true, d.logLinks(a.ActionKey, n, pod, spec)
	}
	switch {
	case res.Outcome == contract.Succeeded:
	case why == "OOMKilled":
		ev = machine.Failed{Attempt: uint32(n), Kind: machine.KindUser, Recoverable: true, Code: attempt.CodeOOMKilled,
			Message: fmt.Sprintf("attempt %d exceeded its memory limit and was killed (OOM)", n)}
	case pod.DeletionTimestamp != nil:
		// Deleted by someone else (this driver records an abort or a
		// timeout before it deletes): the process was killed for it, not
		// by its own failure.
		ev = attempt.PlatformFailure(n, fmt.Sprintf("the Pod of attempt %d was deleted while it ran; the action runs again", n))
	case st == nil || st.State.Terminated == nil:
		// The Pod failed without its container ever running (evicted, its
		// node lost): the platform's failure.
		why := strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
		if init := initFailure(pod); init != "" {
			why = init
		}
		ev = attempt.PlatformFailure(n, fmt.Sprintf("the Pod of attempt %d failed before its task ran: %s", n, why))
	}
	if res.Warning != "" {
		d.log.Warn("attempt ended abnormally after writing its result", "action", a.ActionKey.String(), "attempt", n, "warning", res.Warning)
	}
	a, err = d.apply(ctx, ta, a, spec, ev, rec)
	return a, ctrl.Result{}, err
}

// recreate creates the Pod of a claimed attempt whose Pod was never
// created, planned again (planning reads the row, not the phase); what the
// plan or the Pod's spec says instead of a launch is recorded.
func (d *Driver) recreate(ctx context.Context, ta *v1.TaskAction, a *store.Action) (*store.Action, ctrl.Result, error) {
	plan, err := d.plan(ctx, a)
	if err != nil {
		return a, ctrl.Result{}, err
	}
	if plan.Event != nil {
		a, err = d.apply(ctx, ta, a, plan.Spec, plan.Event, attempt.Record{})
		return a, ctrl.Result{}, err
	}
	pod, err := d.buildPod(ctx, ta, plan.Launch)
	if err != nil {
		a, err = d.apply(ctx, ta, a, plan.Spec, machine.Failed{Attempt: uint32(a.Attempts), Kind: machine.KindUser,
			Code: attempt.CodeLaunchFailed, Message: err.Error()}, attempt.Record{})
		return a, ctrl.Result{}, err
	}
	d.prepareOutputs(plan.Launch.OutDir)
	if err := d.applySecret(ctx, addSecrets(pod, plan.Launch)); err != nil {
		a, _, res, err := d.podCreateFailed(ctx, ta, a, plan.Spec, err)
		return a, res, err
	}
	if err := d.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		d.releaseSecret(ctx, pod)
		a, _, res, err := d.podCreateFailed(ctx, ta, a, plan.Spec, err)
		return a, res, err
	}
	d.metrics.podsCreated.Inc()
	return a, d.timeoutCheck(a, plan.Spec, time.Now()), nil
}

// startedAt is when the Pod's task began (its creation until then).
func startedAt(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// timeoutCheck asks for a reconcile when the attempt's time limit falls due.
func (d *Driver) timeoutCheck(a *store.Action, spec *task.TaskSpec, started time.Time) ctrl.Result {
	at, _ := attempt.Deadline(spec.GetTaskTemplate().GetMetadata(), a.CreatedAt, started)
	if at.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(time.Until(at), time.Millisecond)}
}

// timeoutIfDue stops an attempt whose time limit passed and records it.
func (d *Driver) timeoutIfDue(ctx context.Context, ta *v1.TaskAction, a *store.Action, spec *task.TaskSpec, pod *corev1.Pod) error {
	md := spec.GetTaskTemplate().GetMetadata()
	at, code := attempt.Deadline(md, a.CreatedAt, startedAt(pod))
	if at.IsZero() || time.Now().Before(at) {
		return nil
	}
	if err := d.deletePod(ctx, ta, a.Attempts); err != nil {
		return err
	}
	_, err := d.apply(ctx, ta, a, spec, attempt.TimedOut(a.Attempts, md.GetTimeout().AsDuration(), code), attempt.Record{})
	return err
}

// deletePod deletes the Pod of attempt n of ta, if it exists.
func (d *Driver) deletePod(ctx context.Context, ta *v1.TaskAction, n int32) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ta.Namespace, Name: podName(ta, n)}}
	if err := d.client.Get(ctx, client.ObjectKeyFromObject(pod), pod); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	d.releaseSecret(ctx, pod)
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if err := d.client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

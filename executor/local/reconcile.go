package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// ownAttempt is an attempt this driver started. Its fields other than key, n
// and the paths are guarded by Driver.mu.
type ownAttempt struct {
	key    store.ActionKey
	n      int32
	dir    string // the attempt's directory in the work dir
	outDir string // its output prefix
	spec   *task.TaskSpec
	launch *attempt.Launch // how it was planned

	// user is who its process runs as (the zero User: the manager's),
	// leased from Driver.users before it launches and released when its
	// entry goes. A runner that starts the attempt some other way (a
	// container) runs it as this user too.
	user     runas.User
	handBack sync.Once // its files go back to the manager once it ended (handBack)

	build      *imageBuild // set for a build of the built-in build-image task
	envRelease func()      // releases the image environment it runs in
	container  bool        // it runs in runc: its image is a root filesystem

	proc   *process.Process    // nil until the process started
	status *process.ExitStatus // set when the process ended
	abort  bool                // Abort was called for key
	// written is the action as this driver last wrote it for the attempt
	// (its claim, then RUNNING): recording the end starts from it instead
	// of reading the row again, and reads it only when the row moved.
	written *store.Action
}

// reconcile brings key one step closer to where it should be. It runs in
// the worker that holds key, so it never races with itself for one key.
func (d *Driver) reconcile(ctx context.Context, key store.ActionKey) error {
	// The running map first, the store second: an attempt's end is
	// recorded before its entry goes, so a key without an entry reads the
	// recorded state.
	d.mu.Lock()
	e := d.running[key]
	ended := e != nil && e.status != nil
	d.mu.Unlock()
	if d.lease.Paused() {
		// The lease could not be renewed: nothing is started or recorded
		// until it is; resumeAttempts queues our attempts and rescans.
		return errPaused
	}
	if d.lease.Fence() == 0 {
		// Standby, or the lease was lost: nothing is started or recorded.
		// An attempt of ours that ended is forgotten unrecorded; the
		// holder recovers it from the store (an orphan, or the result its
		// process left).
		if ended {
			d.dropEntry(e)
		}
		return nil
	}
	if e != nil {
		return d.reconcileRunning(ctx, e)
	}
	if held := d.takeWaitRow(key); held != nil {
		// It waits for capacity, and nothing newer than this row came
		// through the change feed. Its parent needs no look: a parent that
		// ends or is aborted marks its unfinished children, a change to
		// this row.
		err := d.reconcileAction(ctx, held, nil)
		if !errors.Is(err, errs.ErrConflict) {
			return err
		}
		// The row moved before the feed said so: read it.
	}
	a, parent, err := d.state.GetWithParent(ctx, key)
	if errors.Is(err, errs.ErrNotFound) {
		d.slots.Forget(key)
		d.forgetWait(key)
		return nil
	}
	if err != nil {
		return err
	}
	return d.reconcileAction(ctx, a, parent)
}

// reconcileRunning handles an attempt of ours: record its end, or pass on
// an abort recorded in the store.
func (d *Driver) reconcileRunning(ctx context.Context, e *ownAttempt) error {
	d.mu.Lock()
	st, p := e.status, e.proc
	d.mu.Unlock()
	if st != nil {
		return d.finish(ctx, e, *st, false)
	}
	if p == nil {
		return nil
	}
	a, err := d.state.Get(ctx, e.key)
	if err != nil {
		return err
	}
	if a.AbortRequestedAt != nil {
		p.Abort("abort requested")
	}
	return nil
}

// reconcileAction acts on a as read, with its parent's state (nil for a
// root), read in the same query.
func (d *Driver) reconcileAction(ctx context.Context, a *store.Action, parent *store.ParentState) error {
	key := a.ActionKey
	if a.Phase.Terminal() {
		d.core.Forget(key)
		d.forgetWait(key)
		return nil
	}
	if a.ActionType == store.ActionTypeCondition {
		// Nothing runs: the core records its abort or its timeout.
		err := d.core.Condition(ctx, a)
		if errors.Is(err, errs.ErrConflict) {
			d.q.add(key) // signalled or aborted meanwhile: look again
			return nil
		}
		return err
	}
	if a.AbortRequestedAt != nil {
		d.slots.Forget(key)
		if a.Phase.Active() {
			// Not ours: whatever is left of the attempt goes first, and a
			// success it reached before the abort still counts.
			return d.recoverOrphan(ctx, a)
		}
		updated, dec, err := d.core.Apply(ctx, a, nil, machine.AbortRequested{Reason: attempt.AbortReason(a)}, attempt.Record{})
		if err != nil {
			return err
		}
		d.core.AfterRecord(ctx, updated, dec)
		return nil
	}
	if a.ActionType != store.ActionTypeTask {
		return d.failPermanently(ctx, a, nil, machine.KindSystem, attempt.CodeUnsupportedTask,
			fmt.Sprintf("action type %d cannot run on the local executor", a.ActionType))
	}
	switch {
	case a.Phase.Active():
		return d.recoverOrphan(ctx, a)
	case a.Phase.Pending():
	default:
		d.log.Debug("leaving an action in a phase the executor does not drive", "action", key.String(), "phase", a.Phase)
		return nil
	}
	if left := d.core.Backoff(key); left > 0 {
		d.q.addAfter(key, left)
		return nil
	}
	if parent != nil {
		if parent.Phase.Terminal() || parent.AbortRequestedAt != nil {
			// Closes the race of a child enqueued while its run was being
			// aborted: marking it (and anything under it) queues it again,
			// and the abort branch above records ABORTED.
			how := "is being aborted"
			if parent.Phase.Terminal() {
				how = "ended " + parent.Phase.String()
			}
			return d.state.Abort(ctx, key, fmt.Sprintf("parent action %s %s", parent.Name, how), "")
		}
	}
	return d.startAttempt(ctx, a)
}

// finish records how an attempt of ours ended. shutdown says the driver is
// stopping: an attempt it stopped for that reason is interrupted, not
// aborted.
func (d *Driver) finish(ctx context.Context, e *ownAttempt, st process.ExitStatus, shutdown bool) error {
	d.mu.Lock()
	a := e.written
	d.mu.Unlock()
	var updated *store.Action
	var dec machine.Decision
	for {
		held := a != nil
		if !held {
			var err error
			a, err = d.state.Get(ctx, e.key)
			if errors.Is(err, errs.ErrNotFound) {
				d.dropEntry(e)
				return nil
			}
			if err != nil {
				return err
			}
		}
		if a.Phase.Terminal() || a.Attempts != e.n {
			d.dropEntry(e)
			return nil
		}
		ev, rec, err := d.outcome(ctx, a, e, st, shutdown)
		if err != nil {
			return err
		}
		failpoint.Hit(failpoint.ProcessExited)
		updated, dec, err = d.core.Apply(ctx, a, e.spec, ev, rec)
		if held && errors.Is(err, errs.ErrConflict) {
			a = nil // the row moved since this driver wrote it (an abort was requested, say): read it
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	d.metrics.countEnd(dec)
	d.log.Info("attempt ended", "action", e.key.String(), "attempt", e.n, "exit", st.Code, "signal", st.Signal,
		"decision", decisionString(dec))
	d.dropEntry(e)
	d.core.AfterRecord(ctx, updated, dec)
	return nil
}

// outcome turns the end of an attempt into a machine event. An abort
// requested while the attempt ran wins over everything but a success the
// process reached on its own: a finished task is recorded as it finished,
// and an aborted action never runs again.
func (d *Driver) outcome(ctx context.Context, a *store.Action, e *ownAttempt, st process.ExitStatus, shutdown bool) (machine.Event, attempt.Record, error) {
	n := uint32(e.n)
	rec := attempt.Record{OutDir: e.outDir}
	aborted := machine.AbortRequested{Reason: attempt.AbortReason(a)}
	if a.AbortRequestedAt != nil && st.Aborted {
		return aborted, rec, nil
	}
	if st.Aborted {
		// Stopped without an abort request: the manager shut down.
		why := "the manager stopped it while shutting down"
		if !shutdown {
			why = "it was stopped (" + st.AbortReason + ")"
		}
		return machine.Orphaned{Attempt: n, Message: fmt.Sprintf("attempt %d was interrupted: %s", n, why)}, rec, nil
	}
	if e.launch != nil && e.launch.Raw != nil {
		if err := d.collectRaw(ctx, e, st); err != nil {
			return nil, rec, err
		}
	}
	if e.build != nil {
		if err := d.collectBuild(ctx, e, st); err != nil {
			return nil, rec, err
		}
	}
	res, err := d.classify(ctx, e.key, e.n, e.spec, e.outDir, st.Contract())
	if err != nil {
		return nil, rec, err
	}
	if a.AbortRequestedAt != nil && res.Outcome != contract.Succeeded {
		return aborted, rec, nil
	}
	if st.OOMKilled && res.Outcome != contract.Succeeded {
		// The kernel killed it at its cgroup's memory limit: the task's own
		// failure, retried within its retries.
		return machine.Failed{Attempt: n, Kind: machine.KindUser, Recoverable: true, Code: attempt.CodeOOMKilled, Message: fmt.Sprintf(
			"attempt %d exceeded its memory limit of %s and was killed (OOM)", n, process.FormatBytes(st.MemoryLimit))}, rec, nil
	}
	if res.Document != nil {
		rec.ErrorURI = runlayout.JoinURI(e.outDir, runlayout.ErrorFile)
	}
	if res.Outcome == contract.TimedOut {
		return e.launch.TimeoutEvent(), rec, nil
	}
	return res.Event(n), rec, nil
}

// stopLeftovers makes sure no process of a's current attempt runs: the
// recorded process group, and any process still working in the attempt's
// directory (one that left the group, or one started by a manager that died
// before it could record the identity). It waits until they are gone; an
// error means something survived and the attempt must not be retried yet.
func (d *Driver) stopLeftovers(a *store.Action) (string, error) {
	dir, err := attemptDir(d.cfg.WorkDir, a.ActionKey, a.Attempts)
	if err != nil {
		return "its directory cannot be named", nil
	}
	var what string
	rec, ok, err := readIdentity(dir)
	switch {
	case err != nil:
		d.log.Warn("unreadable process record", "action", a.ActionKey.String(), "err", err)
		what = "its process record was unreadable"
	case !ok:
		what = "no process had been recorded for it"
	default:
		// Its user is held back from new attempts until nothing of it runs.
		d.users.Reserve(rec.User, fmt.Sprintf("%s attempt %d (recovered)", a.ActionKey, a.Attempts))
		killed, err := process.KillOrphan(rec.Identity, d.killGrace)
		if err != nil {
			return "", fmt.Errorf("stopping the orphaned process group of %s attempt %d: %w", a.ActionKey, a.Attempts, err)
		}
		if killed {
			what = fmt.Sprintf("its process group (pid %d) was still running and has been stopped", rec.Identity.PID)
		} else {
			what = fmt.Sprintf("its process (pid %d) had already ended", rec.Identity.PID)
		}
	}
	cwd := filepath.Join(dir, cwdDir)
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real // /proc shows resolved paths
	}
	stray := process.FindInDir(cwd)
	for _, id := range stray {
		if _, err := process.KillOrphan(id, d.killGrace); err != nil {
			return "", fmt.Errorf("stopping a leftover process of %s attempt %d: %w", a.ActionKey, a.Attempts, err)
		}
	}
	if len(stray) > 0 {
		what += fmt.Sprintf(", and %d leftover process(es) in its directory were stopped", len(stray))
	}
	// A raw container runs in a session of its own.
	if n := d.removeContainer(dir); n > 0 {
		what += ", and its container was stopped"
	}
	// What left the directory too is still in the attempt's cgroup.
	if n, err := d.runner.KillCgroup(filepath.Join(dir, cwdDir)); err != nil {
		return "", fmt.Errorf("stopping what is left in the cgroup of %s attempt %d: %w", a.ActionKey, a.Attempts, err)
	} else if n > 0 {
		what += fmt.Sprintf(", and %d process(es) left in its cgroup were stopped", n)
	}
	if rec.User.Other() {
		// Nothing of it runs: its files go back to the manager, its user
		// back to the pool.
		e := &ownAttempt{key: a.ActionKey, n: a.Attempts, dir: dir, outDir: runlayout.AttemptDir(a.RunOutputBase, a.Name, uint32(a.Attempts)), user: rec.User}
		d.handBack(e)
		d.users.Release(rec.User)
	}
	return what, nil
}

// dropEntry forgets an attempt of ours once its end is recorded (or it never
// started): its slot goes to whoever waits and its secrets go. Its working
// directory stays (see layout.go).
func (d *Driver) dropEntry(e *ownAttempt) {
	d.mu.Lock()
	if d.running[e.key] == e {
		delete(d.running, e.key)
	}
	started := e.proc != nil
	d.mu.Unlock()
	removeSecrets(e.dir)
	d.queueAll(d.slots.Release(e.key))
	d.queueAll(d.resources.release(e.key))
	if started && !e.proc.Contained() {
		// The process ended and took its cgroup and leftovers with it;
		// this catches whatever entered the directory since. A contained
		// attempt's processes could not leave its cgroup, so none of them
		// can be anywhere: no scan of every process on the host.
		process.KillInDir(filepath.Join(e.dir, cwdDir))
	}
	d.handBack(e)
	d.finishBuild(e)
	d.users.Release(e.user)
	if e.envRelease != nil {
		e.envRelease()
	}
}

func (d *Driver) queueAll(keys []store.ActionKey) {
	for _, k := range keys {
		d.q.add(k)
	}
}

// forgetWait forgets when key began to wait for capacity (it ended).
func (d *Driver) forgetWait(key store.ActionKey) {
	d.mu.Lock()
	delete(d.waitingSince, key)
	delete(d.waitRows, key)
	delete(d.changedTo, key)
	d.mu.Unlock()
}

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Error codes the driver records besides the machine's and the contract's.
const (
	CodeUnsupportedTask = "UnsupportedTaskType"
	CodeBadTaskSpec     = "BadTaskSpec"
	CodeRuntimeNotFound = "RuntimeNotFound"
	CodeLaunchFailed    = "LaunchFailed"
	CodeOOMKilled       = "OOMKilled"
)

// attempt is an attempt this driver started. Its fields other than key, n
// and the paths are guarded by Driver.mu.
type attempt struct {
	key     store.ActionKey
	n       int32
	dir     string // the attempt's directory in the work dir
	outDir  string // its output prefix
	spec    *task.TaskSpec
	timeout time.Duration // the process's time limit, 0 for none
	// timeoutCode says which limit timeout is: machine.CodeMaxRuntime or
	// machine.CodeDeadline.
	timeoutCode string

	proc   *process.Process    // nil until the process started
	status *process.ExitStatus // set when the process ended
	abort  bool                // Abort was called for key
}

// runInfo is what attempts take from their run (immutable once created).
type runInfo struct {
	limit     int
	envs      []*core.KeyValuePair
	rawPrefix string
	start     time.Time
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
	if d.lease.isPaused() {
		// The lease could not be renewed: nothing is started or recorded
		// until it is; resumeAttempts queues our attempts and rescans.
		return errPaused
	}
	if d.lease.fence() == 0 {
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
	a, err := d.state.Store().Actions.Get(ctx, key)
	if errors.Is(err, errs.ErrNotFound) {
		d.slots.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	return d.reconcileAction(ctx, a)
}

// reconcileRunning handles an attempt of ours: record its end, or pass on
// an abort recorded in the store.
func (d *Driver) reconcileRunning(ctx context.Context, e *attempt) error {
	d.mu.Lock()
	st, p := e.status, e.proc
	d.mu.Unlock()
	if st != nil {
		return d.finish(ctx, e, *st, false)
	}
	if p == nil {
		return nil
	}
	a, err := d.state.Store().Actions.Get(ctx, e.key)
	if err != nil {
		return err
	}
	if a.AbortRequestedAt != nil {
		p.Abort("abort requested")
	}
	return nil
}

func (d *Driver) reconcileAction(ctx context.Context, a *store.Action) error {
	key := a.ActionKey
	if a.Phase.Terminal() {
		d.slots.forget(key)
		d.clearNotBefore(key)
		return nil
	}
	if a.AbortRequestedAt != nil {
		d.slots.forget(key)
		if a.Phase.Active() {
			// Not ours: whatever is left of the attempt goes first, and a
			// success it reached before the abort still counts.
			return d.recoverOrphan(ctx, a)
		}
		updated, dec, err := d.apply(ctx, a, nil, machine.AbortRequested{Reason: abortReason(a)}, record{})
		if err != nil {
			return err
		}
		d.afterRecord(ctx, updated, dec)
		return nil
	}
	if a.ActionType != store.ActionTypeTask {
		return d.failPermanently(ctx, a, nil, machine.KindSystem, CodeUnsupportedTask,
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
	d.mu.Lock()
	nb, wait := d.notBefore[key]
	d.mu.Unlock()
	if wait {
		if left := time.Until(nb); left > 0 {
			d.q.addAfter(key, left)
			return nil
		}
	}
	if a.ParentName != nil {
		parent, err := d.state.Store().Actions.Get(ctx, key.RunKey.Action(*a.ParentName))
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return err
		}
		if err == nil && (parent.Phase.Terminal() || parent.AbortRequestedAt != nil) {
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

// benchStart is nil in every normal build. Only noop_bench.go (built with
// -tags bench) sets it, and only when FLYTE_MANAGER_BENCH_RUNNER=noop: it
// then stands in for starting the attempt's process, so that `make bench`
// measures the control plane (enqueue, dispatch, store writes, watches)
// without Python start-up. It returns a channel that yields the attempt's
// end, which the driver records exactly as it records a process's end.
var benchStart func(ctx context.Context, d *Driver, a *store.Action, e *attempt, endpoint string) <-chan process.ExitStatus

// startAttempt claims the current attempt of a pending action and starts
// its process.
func (d *Driver) startAttempt(ctx context.Context, a *store.Action) error {
	key, n := a.ActionKey, a.Attempts
	spec, err := d.spec(ctx, a)
	if err != nil {
		var bad badSpecError
		if errors.As(err, &bad) {
			return d.failPermanently(ctx, a, nil, machine.KindSystem, CodeBadTaskSpec, bad.Error())
		}
		return err
	}
	tmpl := spec.GetTaskTemplate()
	c := tmpl.GetContainer()
	if c == nil || len(c.GetCommand())+len(c.GetArgs()) == 0 {
		return d.failPermanently(ctx, a, spec, machine.KindUser, CodeUnsupportedTask, fmt.Sprintf(
			"task type %q has no container command to run: the local executor runs container tasks "+
				"(Python tasks) only; plugin task types need the kubernetes executor", tmpl.GetType()))
	}
	ri, err := d.runInfo(ctx, a.RunKey)
	if err != nil {
		return err
	}
	dir, err := attemptDir(d.cfg.WorkDir, key, n)
	if err != nil {
		return d.failPermanently(ctx, a, spec, machine.KindSystem, CodeLaunchFailed, err.Error())
	}
	inputs, err := d.state.InputsFile(a)
	if err != nil {
		return d.failPermanently(ctx, a, spec, machine.KindSystem, CodeLaunchFailed, err.Error())
	}

	lim, err := d.limits(ctx, a, tmpl.GetMetadata())
	if err != nil {
		return err
	}
	res, err := process.LimitsOf(c.GetResources())
	if err != nil {
		return d.failPermanently(ctx, a, spec, machine.KindUser, CodeLaunchFailed, err.Error())
	}
	if lim.expired != nil {
		d.slots.forget(key)
		updated, dec, err := d.apply(ctx, a, spec, *lim.expired, record{})
		if err != nil {
			return err
		}
		d.afterRecord(ctx, updated, dec)
		return nil
	}

	parent := ""
	if a.ParentName != nil {
		parent = *a.ParentName
	}
	ok, wake := d.slots.acquire(key, parent, ri.limit)
	d.queueAll(wake)
	if !ok {
		if lim.queuedLeft > 0 {
			d.q.addAfter(key, lim.queuedLeft) // to time it out if it still waits then
		}
		if a.Phase == phase.Queued {
			_, _, err := d.apply(ctx, a, spec, machine.Wait{Attempt: uint32(n), Reason: "no free slot"}, record{})
			return err
		}
		return nil
	}
	endpoint := d.endpoint()
	if endpoint == "" {
		// The server does not listen yet: try again shortly.
		d.queueAll(d.slots.release(key))
		d.q.addAfter(key, time.Second)
		return nil
	}

	e := &attempt{key: key, n: n, dir: dir, outDir: runstate.OutputDir(a, n), spec: spec,
		timeout: lim.run, timeoutCode: lim.runCode}
	d.mu.Lock()
	d.running[key] = e
	delete(d.notBefore, key)
	d.mu.Unlock()
	handedOff := false
	defer func() {
		if !handedOff {
			d.dropEntry(e)
		}
	}()

	// Claim the attempt: from here on it is INITIALIZING, and a restart
	// treats it as possibly running.
	a, _, err = d.apply(ctx, a, spec, machine.Start{Attempt: uint32(n)}, record{})
	if err != nil {
		return err
	}
	failpoint.Hit(failpoint.AttemptClaimed)

	args, env, err := d.prepare(a, spec, ri, inputs, e.outDir, endpoint)
	if err != nil {
		return d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
			Code: CodeLaunchFailed, Message: err.Error()})
	}
	if err := freshAttemptDir(dir); err != nil {
		return d.launchFailed(ctx, a, e, platformFailure(n, "could not create the attempt's directory: "+err.Error()))
	}
	if filepath.IsAbs(e.outDir) {
		// Local storage: the runtime writes into the directory directly.
		if err := os.MkdirAll(e.outDir, 0o755); err != nil {
			return d.launchFailed(ctx, a, e, platformFailure(n, "could not create the output directory: "+err.Error()))
		}
	}
	if benchStart != nil {
		// Bench builds only (see benchStart): no process; the attempt
		// ends when the channel yields, recorded as a process's end is.
		done := benchStart(ctx, d, a, e, endpoint)
		handedOff = true
		go func() {
			st := <-done
			d.mu.Lock()
			e.status = &st
			d.mu.Unlock()
			d.q.add(key)
		}()
		d.markRunning(ctx, key, e)
		return nil
	}
	proc, err := d.runner.Start(process.Spec{
		Args:    args,
		Env:     env.Environ(),
		Dir:     filepath.Join(dir, cwdDir),
		LogPath: filepath.Join(dir, logFile),
		Timeout: e.timeout,
		Limits:  res,
	})
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindSystem,
				Code: CodeRuntimeNotFound, Message: err.Error() + " (set executor.local.python to the bin directory of a Python environment with the flyte SDK)"})
		}
		return d.launchFailed(ctx, a, e, platformFailure(n, "could not start the task process: "+err.Error()))
	}
	failpoint.Hit(failpoint.ProcessStarted)
	id := proc.Identity()
	if err := writeIdentity(dir, identityRecord{Action: key.String(), Attempt: n, Identity: id, Started: time.Now().UTC()}); err != nil {
		// Never let an attempt run that a restart could not find.
		proc.Abort("its identity could not be recorded")
		proc.Wait()
		return d.launchFailed(ctx, a, e, platformFailure(n, err.Error()))
	}
	d.mu.Lock()
	e.proc = proc
	abort := e.abort
	d.mu.Unlock()
	if d.lease.isPaused() {
		proc.Pause() // the lease went unrenewed while it started
	}
	handedOff = true
	go d.waitFor(e)
	if abort {
		proc.Abort("abort requested")
	}
	d.metrics.started.Inc()
	d.log.Info("attempt started", "action", key.String(), "attempt", n, "pid", id.PID)
	if why := proc.Unenforced(); why != "" {
		d.log.Warn("resource limits not enforced", "action", key.String(), "attempt", n, "reason", why)
	}
	d.markRunning(ctx, key, e)
	return nil
}

// markRunning records RUNNING with the log info once the process runs. A
// failure here is not fatal: the attempt's end is recorded from
// INITIALIZING just as well.
func (d *Driver) markRunning(ctx context.Context, key store.ActionKey, e *attempt) {
	for try := 0; try < 5; try++ {
		a, err := d.state.Store().Actions.Get(ctx, key)
		if err != nil {
			d.log.Warn("recording RUNNING", "action", key.String(), "err", err)
			return
		}
		if a.Attempts != e.n || a.Phase != phase.Initializing {
			return
		}
		_, _, err = d.apply(ctx, a, e.spec, machine.Running{Attempt: uint32(e.n)}, record{logs: true})
		if !errors.Is(err, errs.ErrConflict) {
			if err != nil {
				d.log.Warn("recording RUNNING", "action", key.String(), "err", err)
			}
			return
		}
	}
}

// waitFor waits for the attempt's process and queues its key so that a
// worker records how it ended.
func (d *Driver) waitFor(e *attempt) {
	st := e.proc.Wait()
	d.mu.Lock()
	e.status = &st
	d.mu.Unlock()
	d.q.add(e.key)
}

// platformFailure is the event for an attempt the platform could not launch
// (no directory, no process): a recoverable system failure, paid from the
// system budget, not the task's.
func platformFailure(n int32, msg string) machine.Failed {
	return machine.Failed{Attempt: uint32(n), Kind: machine.KindSystem, Recoverable: true, Code: CodeLaunchFailed, Message: msg}
}

// launchFailed records that a claimed attempt could not be launched.
func (d *Driver) launchFailed(ctx context.Context, a *store.Action, e *attempt, ev machine.Event) error {
	d.log.Warn("attempt could not start", "action", a.ActionKey.String(), "attempt", e.n, "event", ev.Name())
	updated, dec, err := d.apply(ctx, a, e.spec, ev, record{})
	if err != nil {
		return err
	}
	d.dropEntry(e)
	d.afterRecord(ctx, updated, dec)
	return nil
}

// finish records how an attempt of ours ended. shutdown says the driver is
// stopping: an attempt it stopped for that reason is interrupted, not
// aborted.
func (d *Driver) finish(ctx context.Context, e *attempt, st process.ExitStatus, shutdown bool) error {
	a, err := d.state.Store().Actions.Get(ctx, e.key)
	if errors.Is(err, errs.ErrNotFound) {
		d.dropEntry(e)
		return nil
	}
	if err != nil {
		return err
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
	updated, dec, err := d.apply(ctx, a, e.spec, ev, rec)
	if err != nil {
		return err
	}
	d.metrics.countEnd(dec)
	d.log.Info("attempt ended", "action", e.key.String(), "attempt", e.n, "exit", st.Code, "signal", st.Signal,
		"decision", decisionString(dec))
	d.dropEntry(e)
	d.afterRecord(ctx, updated, dec)
	return nil
}

// outcome turns the end of an attempt into a machine event. An abort
// requested while the attempt ran wins over everything but a success the
// process reached on its own: a finished task is recorded as it finished,
// and an aborted action never runs again.
func (d *Driver) outcome(ctx context.Context, a *store.Action, e *attempt, st process.ExitStatus, shutdown bool) (machine.Event, record, error) {
	n := uint32(e.n)
	rec := record{outDir: e.outDir}
	aborted := machine.AbortRequested{Reason: abortReason(a)}
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
		return machine.Failed{Attempt: n, Kind: machine.KindUser, Recoverable: true, Code: CodeOOMKilled, Message: fmt.Sprintf(
			"attempt %d exceeded its memory limit of %s and was killed (OOM)", n, process.FormatBytes(st.MemoryLimit))}, rec, nil
	}
	if res.Document != nil {
		rec.errorURI = contract.JoinURI(e.outDir, contract.ErrorFile)
	}
	if res.Outcome == contract.TimedOut {
		msg := fmt.Sprintf("attempt %d exceeded its timeout of %s and was stopped", n, e.timeout)
		if e.timeoutCode == machine.CodeDeadline {
			msg = fmt.Sprintf("attempt %d was stopped at the action's deadline", n)
		}
		return machine.TimedOut{Attempt: n, Code: e.timeoutCode, Message: msg}, rec, nil
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
	// What left the directory too is still in the attempt's cgroup.
	if n, err := d.runner.KillCgroup(filepath.Join(dir, cwdDir)); err != nil {
		return "", fmt.Errorf("stopping what is left in the cgroup of %s attempt %d: %w", a.ActionKey, a.Attempts, err)
	} else if n > 0 {
		what += fmt.Sprintf(", and %d process(es) left in its cgroup were stopped", n)
	}
	return what, nil
}

// failPermanently records a non-recoverable failure of a's current attempt.
func (d *Driver) failPermanently(ctx context.Context, a *store.Action, spec *task.TaskSpec, kind machine.ErrorKind, code, msg string) error {
	d.slots.forget(a.ActionKey)
	d.log.Warn("action cannot run", "action", a.ActionKey.String(), "code", code, "reason", msg)
	updated, dec, err := d.apply(ctx, a, spec, machine.Failed{Attempt: uint32(a.Attempts), Kind: kind, Code: code, Message: msg}, record{})
	if err != nil {
		return err
	}
	d.afterRecord(ctx, updated, dec)
	return nil
}

// record is what a store write carries besides the machine's decision.
type record struct {
	outDir   string // the attempt's output prefix, for attempts that ran
	errorURI string // the error document, when the task wrote one
	logs     bool   // the attempt's log exists: record the log info
}

// apply feeds ev to the machine for a and writes the result with a's
// version (errs.ErrConflict when a changed meanwhile).
func (d *Driver) apply(ctx context.Context, a *store.Action, spec *task.TaskSpec, ev machine.Event, rec record) (*store.Action, machine.Decision, error) {
	s := machine.State{Phase: a.Phase, Attempt: uint32(a.Attempts)}
	switch ev.(type) {
	case machine.Failed, machine.Crashed, machine.Orphaned:
		// Retry budgets are counted from the attempts that ended in a retry.
		atts, err := d.state.Store().Actions.Attempts(ctx, a.ActionKey)
		if err != nil {
			return nil, nil, err
		}
		s.UserRetries, s.SystemRetries = spentRetries(atts, a.Attempts)
	}
	p := machine.PolicyFor(spec.GetTaskTemplate().GetMetadata(), uint32(d.cfg.SystemRetries))
	p.SystemBackoff = d.systemBackoff
	next, dec, err := machine.Transition(s, ev, p)
	if err != nil {
		return nil, nil, fmt.Errorf("%s of %s: %w", ev.Name(), a.ActionKey, err)
	}
	fence := d.lease.fence()
	if fence == 0 {
		return nil, nil, errStandby
	}
	var u store.Update
	switch dec := dec.(type) {
	case *machine.Ignored:
		return a, dec, nil
	case *machine.Retry:
		u = store.Update{Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true,
			ErrorInfo: executionError(dec.Cause, rec.errorURI), OutputURI: rec.outDir}
	case *machine.Terminal:
		u = store.Update{Phase: dec.Phase, OutputURI: rec.outDir}
		if dec.Error != nil {
			u.ErrorInfo = executionError(*dec.Error, rec.errorURI)
		}
		if dec.Phase == phase.Aborted && len(a.AbortInfo) == 0 {
			u.AbortInfo, _ = proto.Marshal(&workflow.AbortInfo{Reason: dec.Reason})
		}
	default:
		if next.Phase == s.Phase && !rec.logs {
			return a, dec, nil
		}
		u = store.Update{Phase: next.Phase}
		if rec.logs {
			u.LogInfo, _ = proto.Marshal(&core.TaskLog{Name: "logs"})
		}
	}
	u.Fence = fence
	if _, claim := ev.(machine.Start); claim {
		u.Owner = fence
	}
	updated, err := d.state.Store().Actions.Update(ctx, a.ActionKey, a.ResourceVersion, u)
	if err != nil {
		return nil, nil, err
	}
	d.state.Changed()
	return updated, dec, nil
}

// afterRecord acts on a recorded decision: a retry is queued (after its
// backoff); a terminal action's unfinished descendants are aborted (a
// parent that ended no longer waits for them).
func (d *Driver) afterRecord(ctx context.Context, a *store.Action, dec machine.Decision) {
	switch dec := dec.(type) {
	case *machine.Retry:
		if dec.Delay > 0 {
			d.mu.Lock()
			d.notBefore[a.ActionKey] = time.Now().Add(dec.Delay)
			d.mu.Unlock()
		}
		d.q.addAfter(a.ActionKey, dec.Delay)
	case *machine.Terminal:
		d.slots.forget(a.ActionKey)
		d.clearNotBefore(a.ActionKey)
		if err := d.abortChildren(ctx, a); err != nil {
			d.log.Warn("aborting the children of an ended action", "action", a.ActionKey.String(), "err", err)
		}
	}
}

// abortChildren aborts the unfinished descendants of a terminal action.
func (d *Driver) abortChildren(ctx context.Context, a *store.Action) error {
	page := store.Page{Limit: store.MaxPageSize}
	for {
		kids, next, err := d.state.Store().Actions.ListChildren(ctx, a.ActionKey, page)
		if err != nil {
			return err
		}
		for i := range kids {
			if !kids[i].Phase.Terminal() {
				reason := fmt.Sprintf("parent action %s ended %s", a.Name, a.Phase)
				return d.state.Abort(ctx, a.ActionKey, reason, "")
			}
		}
		if next == "" {
			return nil
		}
		page.Token = next
	}
}

// dropEntry forgets an attempt of ours once its end is recorded (or it never
// started): its slot goes to whoever waits, its working directory goes.
func (d *Driver) dropEntry(e *attempt) {
	d.mu.Lock()
	if d.running[e.key] == e {
		delete(d.running, e.key)
	}
	started := e.proc != nil
	d.mu.Unlock()
	d.queueAll(d.slots.release(e.key))
	if started {
		// The process ended and took its cgroup and leftovers with it;
		// this catches whatever entered the directory since.
		process.KillInDir(filepath.Join(e.dir, cwdDir))
		_ = os.RemoveAll(filepath.Join(e.dir, cwdDir))
	}
}

func (d *Driver) queueAll(keys []store.ActionKey) {
	for _, k := range keys {
		d.q.add(k)
	}
}

func (d *Driver) clearNotBefore(key store.ActionKey) {
	d.mu.Lock()
	delete(d.notBefore, key)
	d.mu.Unlock()
}

// limits are the time limits of an attempt about to start.
type limits struct {
	// expired is the event to record when a limit already passed.
	expired *machine.TimedOut
	// queuedLeft is how long the attempt may still wait for a slot (0: no
	// limit).
	queuedLeft time.Duration
	// run bounds the process (0: none); runCode says which limit it is.
	run     time.Duration
	runCode string
}

// limits applies TaskMetadata.timeout (each attempt's run time) and
// TaskMetadata.timeouts: queued_timeout (how long an attempt may wait to
// start, counted from when it was queued) and deadline (the action's whole
// life, counted from its creation).
func (d *Driver) limits(ctx context.Context, a *store.Action, md *core.TaskMetadata) (limits, error) {
	var l limits
	now := time.Now()
	n := uint32(a.Attempts)
	if q := md.GetTimeouts().GetQueuedTimeout().AsDuration(); q > 0 {
		queuedAt := a.CreatedAt
		if a.Attempts > 1 {
			atts, err := d.state.Store().Actions.Attempts(ctx, a.ActionKey)
			if err != nil {
				return l, err
			}
			for _, at := range atts {
				if at.Attempt == a.Attempts {
					queuedAt = at.StartedAt
				}
			}
		}
		if l.queuedLeft = queuedAt.Add(q).Sub(now); l.queuedLeft <= 0 {
			l.expired = &machine.TimedOut{Attempt: n, Code: machine.CodeQueuedTimeout,
				Message: fmt.Sprintf("attempt %d waited longer than its queued timeout of %s to start", n, q)}
			return l, nil
		}
	}
	if rt := md.GetTimeout().AsDuration(); rt > 0 {
		l.run, l.runCode = rt, machine.CodeMaxRuntime
	}
	if dl := md.GetTimeouts().GetDeadline().AsDuration(); dl > 0 {
		left := a.CreatedAt.Add(dl).Sub(now)
		if left <= 0 {
			l.expired = &machine.TimedOut{Attempt: n, Code: machine.CodeDeadline,
				Message: fmt.Sprintf("the action passed its deadline of %s before attempt %d could start", dl, n)}
			return l, nil
		}
		if l.run == 0 || left < l.run {
			l.run, l.runCode = left, machine.CodeDeadline
		}
	}
	return l, nil
}

// prepare renders the argv and the environment of an attempt.
func (d *Driver) prepare(a *store.Action, spec *task.TaskSpec, ri *runInfo, inputs, outDir, endpoint string) ([]string, contract.Env, error) {
	tmpl := spec.GetTaskTemplate()
	c := tmpl.GetContainer()
	n := a.Attempts
	raw := ri.rawPrefix
	if raw == "" {
		raw = contract.JoinURI(outDir, "raw")
	}
	v := contract.Values{
		InputURI:               inputs,
		OutputPrefix:           outDir,
		RawOutputDataPrefix:    raw,
		CheckpointOutputPrefix: contract.JoinURI(outDir, contract.CheckpointsDir),
		RunName:                a.RunName,
		ActionName:             a.Name,
		RunStartTime:           ri.start,
	}
	if n > 1 {
		v.PrevCheckpointPrefix = contract.JoinURI(runstate.OutputDir(a, n-1), contract.CheckpointsDir)
	}
	argv := append(append([]string(nil), c.GetCommand()...), c.GetArgs()...)
	args := contract.RenderArgs(argv, v)
	env, err := contract.BuildEnv(contract.EnvSpec{
		Host:       os.Environ(),
		RunEnv:     ri.envs,
		TaskEnv:    c.GetEnv(),
		Org:        a.Org,
		Project:    a.Project,
		Domain:     a.Domain,
		RunName:    a.RunName,
		ActionName: a.Name,
		Attempt:    uint32(n),
		RunBase:    a.RunOutputBase,
		Endpoint:   endpoint,
		TaskID:     tmpl.GetId(),
	})
	if err != nil {
		return nil, nil, err
	}
	return args, env, nil
}

// freshAttemptDir makes sure dir does not exist: a directory left by an
// earlier database with the same names is moved aside, never reused.
func freshAttemptDir(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		if err := os.Rename(dir, fmt.Sprintf("%s.stale-%d", dir, time.Now().UnixNano())); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// badSpecError: the action's TaskSpec is missing or unreadable; it can
// never run.
type badSpecError struct{ err error }

func (e badSpecError) Error() string { return "the task spec cannot be read: " + e.err.Error() }
func (e badSpecError) Unwrap() error { return e.err }

// spec loads a's TaskSpec, telling a spec that can never be read apart from
// a database that cannot be reached.
func (d *Driver) spec(ctx context.Context, a *store.Action) (*task.TaskSpec, error) {
	spec, err := d.state.Spec(ctx, a)
	if err == nil {
		return spec, nil
	}
	if errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrInvalid) {
		return nil, badSpecError{err}
	}
	if _, rerr := d.state.Store().Tasks.GetSpec(ctx, a.SpecDigest); rerr == nil {
		return nil, badSpecError{err} // stored, but not a TaskSpec
	}
	return nil, err
}

// runInfo returns what attempts of run take from the run, cached.
func (d *Driver) runInfo(ctx context.Context, run store.RunKey) (*runInfo, error) {
	d.mu.Lock()
	ri := d.runs[run]
	d.mu.Unlock()
	if ri != nil {
		return ri, nil
	}
	root, err := d.state.Store().Actions.Get(ctx, run.Action(store.RootName))
	if err != nil {
		return nil, err
	}
	rs := &task.RunSpec{}
	if err := proto.Unmarshal(root.RunSpec, rs); err != nil {
		return nil, fmt.Errorf("run spec of %s is unreadable: %w", run, err)
	}
	ri = &runInfo{
		limit:     int(rs.GetMaxActionConcurrency()),
		envs:      rs.GetEnvs().GetValues(),
		rawPrefix: rs.GetRawDataStorage().GetRawDataPrefix(),
		start:     root.CreatedAt,
	}
	if rs.GetRunStartTime() != nil {
		ri.start = rs.GetRunStartTime().AsTime()
	}
	d.mu.Lock()
	if len(d.runs) >= 4096 { // bounded: drop everything rather than track recency
		clear(d.runs)
	}
	d.runs[run] = ri
	d.mu.Unlock()
	return ri, nil
}

// spentRetries counts the retries already paid from each budget: every
// attempt before the current one ended in a retry, on the system budget when
// its error is of SYSTEM origin, else on the user budget (the machine's rule).
func spentRetries(atts []store.Attempt, current int32) (user, system uint32) {
	for _, at := range atts {
		if at.Attempt >= current {
			continue
		}
		ee := &core.ExecutionError{}
		if len(at.ErrorInfo) > 0 && proto.Unmarshal(at.ErrorInfo, ee) == nil && ee.GetKind() == core.ExecutionError_SYSTEM {
			system++
		} else {
			user++
		}
	}
	return user, system
}

// executionError is the stored form of a machine error.
func executionError(e machine.Error, errorURI string) []byte {
	rec := core.ContainerError_NON_RECOVERABLE
	if e.Recoverable {
		rec = core.ContainerError_RECOVERABLE
	}
	b, _ := proto.Marshal(&core.ExecutionError{
		Code:           e.Code,
		Message:        e.Message,
		ErrorUri:       errorURI,
		Kind:           core.ExecutionError_ErrorKind(e.Kind),
		Timestamp:      timestamppb.Now(),
		Recoverability: rec,
	})
	return b
}

func abortReason(a *store.Action) string {
	ai := &workflow.AbortInfo{}
	if len(a.AbortInfo) > 0 && proto.Unmarshal(a.AbortInfo, ai) == nil && ai.GetReason() != "" {
		return ai.GetReason()
	}
	return "abort requested"
}

func decisionString(dec machine.Decision) string {
	if dec == nil {
		return "none"
	}
	return dec.String()
}

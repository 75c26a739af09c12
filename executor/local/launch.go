package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Launching an attempt: the checks before it starts (spec, limits, slots),
// the process contract values, and the process itself.

// An attemptRunner runs a claimed attempt whose directories exist. Once
// the attempt runs it returns the action as last written, and the
// attempt's end reaches a worker later (Driver.ended), recorded as any
// attempt's end is. When the attempt could not start it returns nil, having
// recorded why (launchFailed).
type attemptRunner func(d *Driver, ctx context.Context, a *store.Action, e *ownAttempt, s launchSetup) (*store.Action, error)

// launchSetup is what the driver settled for an attempt before it claimed
// it.
type launchSetup struct {
	endpoint string         // the manager's host:port as the attempt reaches it
	gpus     []attempt.GPU  // the devices it holds
	limits   process.Limits // its resource limits
}

// defaultRunner is the runner New gives every driver: a host process per
// attempt. Only the bench build replaces it, with the no-op runner of
// `make bench` (noop_bench.go), which measures the control plane without
// Python start-up.
var defaultRunner attemptRunner = (*Driver).startProcess

// startAttempt claims the current attempt of a pending action and has the
// driver's runner run it. The attempt core plans it (spec, limits, cache,
// secrets, the contract's argv and environment); the driver adds what is
// local: the attempt's directory, resource limits as a cgroup, the host's
// share and a slot among maxParallelism (takeCapacity), and the runner (a
// host process: startProcess).
func (d *Driver) startAttempt(ctx context.Context, a *store.Action) error {
	key, n := a.ActionKey, a.Attempts
	endpoint := d.endpoint()
	if endpoint == "" {
		// The server does not listen yet: try again shortly.
		d.q.addAfter(key, time.Second)
		return nil
	}
	plan, err := d.core.Plan(ctx, a, attempt.PlanOptions{Endpoint: endpoint, HostEnv: os.Environ(),
		NoContainer: "the local executor runs container tasks (Python tasks) only; plugin task types need the kubernetes executor",
		Resources:   &attempt.HostResources{Host: d.resources.host, Fail: d.unsatisfiableFails}})
	if err != nil {
		return err
	}
	spec := plan.Spec
	if plan.Event != nil {
		if plan.RetryAfter > 0 {
			d.q.addAfter(key, plan.RetryAfter) // plan again: the wait may be over by then
		}
		return d.recordPlanned(ctx, a, spec, plan.Event, plan.Record)
	}
	l := plan.Launch
	dir, err := attemptDir(d.cfg.WorkDir, key, n)
	if err != nil {
		return d.failPermanently(ctx, a, spec, machine.KindSystem, attempt.CodeLaunchFailed, err.Error())
	}
	res, err := process.LimitsOf(l.Container().GetResources())
	if err != nil {
		return d.failPermanently(ctx, a, spec, machine.KindUser, attempt.CodeLaunchFailed, err.Error())
	}
	gpus, ok, err := d.takeCapacity(ctx, a, spec, l)
	if !ok {
		return err
	}

	user, err := d.users.Lease(fmt.Sprintf("%s attempt %d", key, n))
	if err != nil {
		d.queueAll(d.slots.Release(key))
		d.queueAll(d.resources.release(key))
		d.log.Warn("no user for the attempt: it waits", "action", key.String(), "err", err)
		d.q.addAfter(key, time.Second)
		return nil
	}
	e := &ownAttempt{key: key, n: n, dir: dir, outDir: l.OutDir, spec: spec, launch: l, user: user}
	d.mu.Lock()
	d.running[key] = e
	delete(d.waitingSince, key)
	delete(d.waitRows, key)
	delete(d.changedTo, key)
	d.mu.Unlock()
	handedOff := false
	defer func() {
		if !handedOff {
			d.dropEntry(e)
		}
	}()

	// Claim the attempt: from here on it is INITIALIZING, and a restart
	// treats it as possibly running.
	a, _, err = d.core.Apply(ctx, a, spec, machine.Start{Attempt: uint32(n)}, attempt.Record{})
	if err != nil {
		return err
	}
	d.wrote(e, a)
	failpoint.Hit(failpoint.AttemptClaimed)

	if err := freshAttemptDir(dir); err != nil {
		return d.launchFailed(ctx, a, e, attempt.PlatformFailure(n, "could not create the attempt's directory: "+err.Error()))
	}
	if filepath.IsAbs(e.outDir) {
		// Local storage: the runtime writes into the directory directly,
		// as the attempt's user.
		err := d.openRunBase(a.RunOutputBase)
		if err == nil {
			err = os.MkdirAll(e.outDir, 0o755)
		}
		if err == nil {
			err = process.GiveDir(e.outDir, e.processUser())
		}
		if err != nil {
			return d.launchFailed(ctx, a, e, attempt.PlatformFailure(n, "could not create the output directory: "+err.Error()))
		}
	}
	running, err := d.runAttempt(d, ctx, a, e, launchSetup{endpoint: endpoint, gpus: gpus, limits: res})
	if running == nil {
		return err
	}
	handedOff = true
	d.wrote(e, running)
	d.markRunning(ctx, running, e)
	return nil
}

// startProcess is the attemptRunner that runs the attempt as a host
// process: its secrets, the command (the SDK's runtime, or a raw
// container's own), its devices, and a record of the process's identity
// that a restarted manager finds.
func (d *Driver) startProcess(ctx context.Context, a *store.Action, e *ownAttempt, s launchSetup) (*store.Action, error) {
	key, n, dir, l, gpus := e.key, e.n, e.dir, e.launch, s.gpus
	env, err := deliverSecrets(dir, l, e.user)
	if err != nil {
		removeSecrets(dir)
		return nil, d.launchFailed(ctx, a, e, attempt.PlatformFailure(n, err.Error()))
	}
	args, binDir := l.Args, ""
	switch {
	case images.IsBuild(l.Spec):
		var b *imageBuild
		if args, env, b, err = d.prepareBuild(ctx, a, dir, e.user); err != nil {
			removeSecrets(dir)
			return nil, d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
				Code: attempt.CodeLaunchFailed, Message: err.Error()})
		}
		d.mu.Lock()
		e.build = b
		d.mu.Unlock()
	default:
		var release func()
		if binDir, env, release, err = d.imageEnv(l, env); err != nil {
			removeSecrets(dir)
			return nil, d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
				Code: attempt.CodeLaunchFailed, Message: err.Error()})
		}
		d.mu.Lock()
		e.envRelease = release
		d.mu.Unlock()
		if key, ok := d.rootfsImage(l); ok && l.Raw == nil {
			var note string
			if args, note, err = d.prepareRootfsRun(dir, key, args, env, e.user); err == nil {
				err = process.AppendSystemLine(filepath.Join(dir, logFile), note)
			}
			if err != nil {
				removeSecrets(dir)
				return nil, d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
					Code: attempt.CodeLaunchFailed, Message: err.Error()})
			}
			d.mu.Lock()
			e.container = true
			d.mu.Unlock()
		}
	}
	if l.Raw != nil {
		var reason, note string
		if args, reason, note, err = d.prepareRaw(ctx, dir, l, e.user); err != nil {
			removeSecrets(dir)
			return nil, d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindUser,
				Code: attempt.CodeLaunchFailed, Message: err.Error()})
		}
		a = d.reportRaw(ctx, a, reason, note)
	}
	if len(gpus) > 0 || len(d.resources.host.GPUs) > 0 {
		// Its own devices, and none of the others' (as a Pod without a
		// GPU request sees none).
		env = env.With(contract.KV{Key: cudaDevices, Value: cudaEnv(gpus)})
	}
	proc, err := d.runner.Start(process.Spec{
		Args:    args,
		Env:     env.Environ(),
		Dir:     filepath.Join(dir, cwdDir),
		LogPath: filepath.Join(dir, logFile),
		Timeout: l.Timeout,
		Limits:  s.limits,
		Plain:   l.Raw != nil || e.build != nil || e.container, // not the SDK's runtime (here)
		BinDir:  binDir,
		User:    e.processUser(),
		UserNS:  e.buildNS(),
	})
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, d.launchFailed(ctx, a, e, machine.Failed{Attempt: uint32(n), Kind: machine.KindSystem,
				Code: attempt.CodeRuntimeNotFound, Message: err.Error() + " (set executor.local.python to the bin directory of a Python environment with the flyte SDK)"})
		}
		return nil, d.launchFailed(ctx, a, e, attempt.PlatformFailure(n, "could not start the task process: "+err.Error()))
	}
	failpoint.Hit(failpoint.ProcessStarted)
	id := proc.Identity()
	if err := writeIdentity(dir, identityRecord{Action: key.String(), Attempt: n, Identity: id, User: e.user, Started: time.Now().UTC()}); err != nil {
		// Never let an attempt run that a restart could not find.
		proc.Abort("its identity could not be recorded")
		proc.Wait()
		return nil, d.launchFailed(ctx, a, e, attempt.PlatformFailure(n, err.Error()))
	}
	d.mu.Lock()
	e.proc = proc
	abort := e.abort
	d.mu.Unlock()
	if d.lease.Paused() {
		proc.Pause() // the lease went unrenewed while it started
	}
	go d.waitFor(e)
	d.shipLog(a, n, d.recorded(e))
	if abort {
		proc.Abort("abort requested")
	}
	d.metrics.countStart(proc.Warm())
	d.log.Info("attempt started", "action", key.String(), "attempt", n, "pid", id.PID)
	if why := proc.Unenforced(); why != "" {
		d.log.Warn("resource limits not enforced", "action", key.String(), "attempt", n, "reason", why)
	}
	return a, nil
}

// takeCapacity takes the host's share and a slot for a's attempt. Without
// them the attempt waits (ok false): queued again to time it out when its
// queued timeout passes, and WAITING_FOR_RESOURCES recorded once the wait
// outlasts the grace.
func (d *Driver) takeCapacity(ctx context.Context, a *store.Action, spec *task.TaskSpec, l *attempt.Launch) (gpus []attempt.GPU, ok bool, err error) {
	key := a.ActionKey
	parent := ""
	if a.ParentName != nil {
		parent = *a.ParentName
	}
	gpus, busy := d.resources.acquire(key, parent, l.Request)
	ok, wake := busy == "", []store.ActionKey(nil)
	if ok {
		var why string
		if ok, why, wake = d.slots.Acquire(key, l.Ask()); !ok {
			d.queueAll(d.resources.release(key))
			busy = why
		}
	}
	d.queueAll(wake)
	if ok {
		return gpus, true, nil
	}
	d.holdWaitRow(a)
	if l.QueuedLeft > 0 {
		d.q.addAfter(key, l.QueuedLeft) // to time it out if it still waits then
	}
	if a.Phase != phase.Queued {
		return nil, false, nil
	}
	if left := d.waitUnrecorded(key); left > 0 {
		d.q.addAfter(key, left) // to record the wait then if it still lasts
		return nil, false, nil
	}
	waiting, _, err := d.core.Apply(ctx, a, spec, machine.Wait{Attempt: uint32(a.Attempts), Reason: busy}, attempt.Record{})
	if err != nil {
		return nil, false, err
	}
	d.mu.Lock()
	delete(d.waitingSince, key) // recorded: the phase says it waits now
	d.mu.Unlock()
	d.holdWaitRow(waiting)
	return nil, false, nil
}

// holdWaitRow keeps a, the row of an action that waits for capacity as
// this driver read or wrote it, for the next look at it (waitRows), unless
// a newer one is held already.
func (d *Driver) holdWaitRow(a *store.Action) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := a.ActionKey
	if v, ok := d.changedTo[key]; ok {
		delete(d.changedTo, key)
		if v > a.ResourceVersion {
			return // it changed since a was read: the look queued meanwhile reads it
		}
	}
	if held := d.waitRows[key]; held == nil || held.ResourceVersion < a.ResourceVersion {
		d.waitRows[key] = a
	}
}

// takeWaitRow returns the row held for key (waitRows), if any, and lets go
// of it: the look that uses it holds it again if the action still waits.
func (d *Driver) takeWaitRow(key store.ActionKey) *store.Action {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.waitRows[key]
	delete(d.waitRows, key)
	return a
}

// waitUnrecorded returns how much longer key's wait for capacity stays
// unrecorded: the wait began at its first call (see defaultWaitGrace); 0
// once it has lasted the grace.
func (d *Driver) waitUnrecorded(key store.ActionKey) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	since, ok := d.waitingSince[key]
	if !ok {
		since = time.Now()
		d.waitingSince[key] = since
	}
	return d.waitGrace - time.Since(since)
}

// recordPlanned records the event planning returned instead of a launch
// (the spec cannot run, a limit passed, the cache answered).
func (d *Driver) recordPlanned(ctx context.Context, a *store.Action, spec *task.TaskSpec, ev machine.Event, rec attempt.Record) error {
	d.slots.Forget(a.ActionKey)
	if f, ok := ev.(machine.Failed); ok {
		d.log.Warn("action cannot run", "action", a.ActionKey.String(), "code", f.Code, "reason", f.Message)
	}
	updated, dec, err := d.core.Apply(ctx, a, spec, ev, rec)
	if err != nil {
		return err
	}
	d.core.AfterRecord(ctx, updated, dec)
	return nil
}

// markRunning records RUNNING with the log info once the process runs. A
// failure here is not fatal: the attempt's end is recorded from
// INITIALIZING just as well. a is the action as this driver last wrote it
// (the claim): it is read again only when it changed meanwhile (an abort
// was requested, say).
func (d *Driver) markRunning(ctx context.Context, a *store.Action, e *ownAttempt) {
	key := a.ActionKey
	for try := 0; try < 5; try++ {
		if try > 0 {
			var err error
			if a, err = d.state.Get(ctx, key); err != nil {
				d.log.Warn("recording RUNNING", "action", key.String(), "err", err)
				return
			}
		}
		if a.Attempts != e.n || a.Phase != phase.Initializing {
			return
		}
		updated, _, err := d.core.Apply(ctx, a, e.spec, machine.Running{Attempt: uint32(e.n)},
			attempt.Record{Logs: true, LogLinks: d.logLinks.links(key, e.n, e.spec)})
		if err == nil {
			d.wrote(e, updated)
		}
		if !errors.Is(err, errs.ErrConflict) {
			if err != nil {
				d.log.Warn("recording RUNNING", "action", key.String(), "err", err)
			}
			return
		}
	}
}

// wrote remembers a as what the driver last wrote for e's attempt.
func (d *Driver) wrote(e *ownAttempt, a *store.Action) {
	d.mu.Lock()
	e.written = a
	d.mu.Unlock()
}

// processUser is who the attempt's host process runs as: its user (an
// image build too: imageenv.go), except for a raw container run through
// util-linux's unshare, which must make its mount namespace as root
// (rawcontainer.go); a container runtime that takes the user itself (runc)
// runs it as e.user.
func (e *ownAttempt) processUser() runas.User {
	if e.launch != nil && e.launch.Raw != nil || e.container || e.buildNS() != nil {
		return runas.User{}
	}
	return e.user
}

// waitFor waits for the attempt's process to end (and a raw container's
// to be gone too); what it made goes back to
// the manager before its end is recorded, so that nothing that learns of
// the end (a downstream task reading its outputs) finds it the user's.
func (d *Driver) waitFor(e *ownAttempt) {
	st := e.proc.Wait()
	if e.launch != nil && e.launch.Raw != nil || e.container {
		d.removeContainer(e.dir)
	}
	d.handBack(e)
	d.ended(e, st)
}

// handBack gives the directories an attempt of another user wrote (its
// working directory, its outputs) back to the manager once its process
// ended (process.HandBack); once per attempt.
func (d *Driver) handBack(e *ownAttempt) {
	e.handBack.Do(func() {
		if !e.user.Other() {
			return
		}
		for _, dir := range []string{filepath.Join(e.dir, cwdDir), e.outDir} {
			if !filepath.IsAbs(dir) {
				continue
			}
			if err := process.HandBack(dir, e.user, d.users.Group()); err != nil {
				d.log.Warn("giving an attempt's files back to the manager", "action", e.key.String(), "attempt", e.n, "err", err)
			}
		}
	})
}

// ended takes the end of an attempt that ran and queues its key, so that a
// worker records how it ended.
func (d *Driver) ended(e *ownAttempt, st process.ExitStatus) {
	d.mu.Lock()
	e.status = &st
	d.mu.Unlock()
	d.q.add(e.key)
}

// launchFailed records that a claimed attempt could not be launched.
func (d *Driver) launchFailed(ctx context.Context, a *store.Action, e *ownAttempt, ev machine.Event) error {
	d.log.Warn("attempt could not start", "action", a.ActionKey.String(), "attempt", e.n, "event", ev.Name())
	updated, dec, err := d.core.Apply(ctx, a, e.spec, ev, attempt.Record{})
	if err != nil {
		return err
	}
	d.dropEntry(e)
	d.core.AfterRecord(ctx, updated, dec)
	return nil
}

// freshAttemptDir makes sure dir does not exist: a directory left by an
// earlier database with the same names is moved aside, never reused.
func freshAttemptDir(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		if err := os.Rename(dir, fmt.Sprintf("%s.stale-%d", dir, time.Now().UnixNano())); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755) // less the umask (users.go)
}

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

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/process"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/failpoint"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Launching an attempt: the checks before it starts (spec, limits, slots),
// the process contract values, and the process itself.

// runInfo is what attempts take from their run (immutable once created).
type runInfo struct {
	limit     int
	envs      []*core.KeyValuePair
	rawPrefix string
	start     time.Time
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

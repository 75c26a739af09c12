package attempt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/copilot"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// Launch describes an attempt ready to start: everything a driver needs to
// launch it under the task-process contract.
type Launch struct {
	Action  *store.Action
	Spec    *task.TaskSpec
	Attempt int32
	// OutDir is the attempt's output prefix (outputs.pb, error.pb).
	OutDir string
	// Args is the rendered argv (container command then args).
	Args []string
	// Env is the attempt's environment, contract variables included.
	Env contract.Env
	// Timeout bounds the attempt's run (0: none); TimeoutCode says which
	// limit it is (machine.CodeMaxRuntime or machine.CodeDeadline).
	Timeout     time.Duration
	TimeoutCode string
	// QueuedLeft is how long the attempt may still wait to start (0: no
	// limit); a driver that cannot start it yet looks again by then.
	QueuedLeft time.Duration
	// ConcurrencyLimit is the run's max_action_concurrency (0: none).
	ConcurrencyLimit int
	// Request is what the attempt needs of its host (requests decide).
	Request Request
	// Queue is the named queue the action is on, with its limits (the
	// zero Queue for none); Ask turns both into what Slots need.
	Queue config.Queue
	// Secrets are the secrets the task requested, with their values: a
	// driver delivers them (contract.SecretEnv tells the task where) and
	// keeps them out of Env, logs and specs.
	Secrets []contract.Secret
	// Raw is the data contract of a raw container task (nil for others):
	// the driver materialises its inputs before the command runs and
	// collects its outputs after (package copilot).
	Raw *copilot.Job
}

// Container is the task's container.
func (l *Launch) Container() *core.Container { return l.Spec.GetTaskTemplate().GetContainer() }

// TimeoutEvent is the event to record when the attempt's Timeout fired.
func (l *Launch) TimeoutEvent() machine.TimedOut {
	return TimedOut(l.Attempt, l.Timeout, l.TimeoutCode)
}

// TimedOut is the event for attempt n stopped by its limit: the run-time
// limit timeout, or the action's deadline (code machine.CodeDeadline).
func TimedOut(n int32, timeout time.Duration, code string) machine.TimedOut {
	msg := fmt.Sprintf("attempt %d exceeded its timeout of %s and was stopped", n, timeout)
	if code == machine.CodeDeadline {
		msg = fmt.Sprintf("attempt %d was stopped at the action's deadline", n)
	}
	return machine.TimedOut{Attempt: uint32(n), Code: code, Message: msg}
}

// Plan is the outcome of planning: either a Launch, or an Event to record
// instead (the spec cannot run, a limit passed, the cache answered).
type Plan struct {
	Launch *Launch
	Event  machine.Event
	// Spec is the action's TaskSpec when it could be read (for Apply).
	Spec *task.TaskSpec
	// Record goes with Event to Apply (a cache hit's outputs and status).
	Record Record
	// RetryAfter, with a Wait event, is when to plan again.
	RetryAfter time.Duration
}

// PlanOptions are what planning needs from the driver.
type PlanOptions struct {
	// Endpoint is the manager's address as the attempt reaches it.
	Endpoint string
	// TLS says the endpoint speaks TLS.
	TLS bool
	// HostEnv is the environment an attempt may inherit from (the local
	// driver passes os.Environ(); a Pod inherits nothing from the manager).
	HostEnv []string
	// NoContainer explains, for this driver, why a task without a container
	// command cannot run.
	NoContainer string
	// Resources, when set, checks requests against one host (the local
	// driver; on kubernetes the cluster's scheduler places Pods).
	Resources *HostResources
}

// Plan decides how a's current attempt starts: spec → recovery (a
// recovering run's reused actions, recover.go) → limits → cache → secrets →
// the contract's values and environment.
func (c *Core) Plan(ctx context.Context, a *store.Action, o PlanOptions) (Plan, error) {
	n := a.Attempts
	spec, err := c.Spec(ctx, a)
	if err != nil {
		var bad BadSpecError
		if errors.As(err, &bad) {
			return c.failPlan(nil, a, machine.KindSystem, CodeBadTaskSpec, bad.Error()), nil
		}
		return Plan{}, err
	}
	tmpl := spec.GetTaskTemplate()
	if ct := tmpl.GetContainer(); ct == nil || len(ct.GetCommand())+len(ct.GetArgs()) == 0 {
		return c.failPlan(spec, a, machine.KindUser, CodeUnsupportedTask, fmt.Sprintf(
			"task type %q has no container command to run: %s", tmpl.GetType(), o.NoContainer)), nil
	}
	ri, err := c.run(ctx, a.RunKey)
	if err != nil {
		return Plan{}, err
	}
	if p, done, err := c.planRecover(ctx, a, spec, ri); err != nil || done {
		return p, err
	}
	inputs, err := c.state.InputsFile(a)
	if err != nil {
		return c.failPlan(spec, a, machine.KindSystem, CodeLaunchFailed, err.Error()), nil
	}
	lim, err := c.limits(ctx, a, tmpl.GetMetadata())
	if err != nil {
		return Plan{}, err
	}
	req, p, done := c.planResources(spec, a, o.Resources, &lim)
	if done {
		return p, nil
	}
	if lim.expired != nil {
		return Plan{Event: *lim.expired, Spec: spec}, nil
	}
	if p, done, err := c.planCache(ctx, a, spec, ri); err != nil || done {
		return p, err
	}
	secrets, failed, err := c.secrets(ctx, a, tmpl.GetSecurityContext().GetSecrets())
	if err != nil {
		return Plan{}, err
	}
	if failed != "" {
		return c.failPlan(spec, a, machine.KindUser, CodeSecretNotFound, failed), nil
	}
	var storageEnv []contract.KV
	if sa := c.opts.Storage; sa != nil {
		own := sa.Secrets
		if sa.Scoped != nil {
			if own, err = sa.Scoped(a, lim.run); err != nil {
				return Plan{}, err
			}
		}
		// First, so that a secret the task requests under the same name wins.
		secrets = append(slices.Clone(own), secrets...)
		storageEnv = sa.Env
	}
	var auth *contract.TaskAuth
	tls := o.TLS
	if cr := c.opts.Credential; cr != nil {
		secrets = append(secrets, contract.Secret{Key: CredentialSecretKey, Value: []byte(cr.Mint(a, lim.run)), EnvVar: contract.EnvTaskToken})
		auth = &contract.TaskAuth{SkipVerify: cr.SkipVerify}
		tls = tls || cr.TLS
	}
	l := &Launch{Action: a, Spec: spec, Attempt: n, OutDir: runlayout.AttemptDir(a.RunOutputBase, a.Name, uint32(n)),
		Timeout: lim.run, TimeoutCode: lim.runCode, QueuedLeft: lim.queuedLeft, ConcurrencyLimit: ri.limit, Secrets: secrets, Request: req, Queue: c.queueOf(a)}
	l.Args = contract.RenderArgs(argv(tmpl.GetContainer()),
		contract.ValuesFor(inputs, a.RunOutputBase, ri.rawPrefix, a.RunName, a.Name, uint32(n), ri.start))
	if copilot.IsRaw(tmpl) {
		if bad, err := c.planRaw(ctx, l, inputs); err != nil {
			return Plan{}, err
		} else if bad != "" {
			return c.failPlan(spec, a, machine.KindUser, CodeLaunchFailed, bad), nil
		}
	}
	l.Env, err = contract.BuildEnv(contract.EnvSpec{
		Host:       o.HostEnv,
		Defaults:   storageEnv,
		RunEnv:     ri.envs,
		TaskEnv:    tmpl.GetContainer().GetEnv(),
		Org:        a.Org,
		Project:    a.Project,
		Domain:     a.Domain,
		RunName:    a.RunName,
		ActionName: a.Name,
		Attempt:    uint32(n),
		RunBase:    a.RunOutputBase,
		Endpoint:   o.Endpoint,
		TLS:        tls,
		Auth:       auth,
		TaskID:     tmpl.GetId(),
	})
	if err != nil {
		return c.failPlan(spec, a, machine.KindUser, CodeLaunchFailed, err.Error()), nil
	}
	if err := c.seedTraces(ctx, a, ri); err != nil {
		return Plan{}, err
	}
	return Plan{Launch: l, Spec: spec}, nil
}

func (c *Core) failPlan(spec *task.TaskSpec, a *store.Action, kind machine.ErrorKind, code, msg string) Plan {
	return Plan{Spec: spec, Event: machine.Failed{Attempt: uint32(a.Attempts), Kind: kind, Code: code, Message: msg}}
}

func argv(c *core.Container) []string {
	return append(append([]string(nil), c.GetCommand()...), c.GetArgs()...)
}

// limits are the time limits of an attempt about to start.
type limits struct {
	// expired is the event to record when a limit already passed.
	expired *machine.TimedOut
	// queuedLeft is how long the attempt may still wait for a slot (0: no
	// limit).
	queuedLeft time.Duration
	// run bounds the attempt (0: none); runCode says which limit it is.
	run     time.Duration
	runCode string
}

// limits applies TaskMetadata.timeout (each attempt's run time) and
// TaskMetadata.timeouts: queued_timeout (how long an attempt may wait to
// start, counted from when it was queued) and deadline (the action's whole
// life, counted from its creation).
func (c *Core) limits(ctx context.Context, a *store.Action, md *core.TaskMetadata) (limits, error) {
	var l limits
	now := time.Now()
	n := uint32(a.Attempts)
	if q := md.GetTimeouts().GetQueuedTimeout().AsDuration(); q > 0 {
		queuedAt := a.CreatedAt
		if a.Attempts > 1 {
			atts, err := c.state.Attempts(ctx, a.ActionKey)
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
	at, code := Deadline(md, a.CreatedAt, now)
	if at.IsZero() {
		return l, nil
	}
	if code == machine.CodeDeadline && !at.After(now) {
		l.expired = &machine.TimedOut{Attempt: n, Code: machine.CodeDeadline, Message: fmt.Sprintf(
			"the action passed its deadline of %s before attempt %d could start", md.GetTimeouts().GetDeadline().AsDuration(), n)}
		return l, nil
	}
	l.run, l.runCode = at.Sub(now), code
	return l, nil
}

// Deadline is when an attempt that started at started must stop: the
// earlier of its run-time limit (TaskMetadata.timeout, counted from its
// start) and the action's deadline (TaskMetadata.timeouts.deadline,
// counted from the action's creation). code says which limit it is
// (machine.CodeMaxRuntime or machine.CodeDeadline); zero means no limit.
func Deadline(md *core.TaskMetadata, created, started time.Time) (time.Time, string) {
	var at time.Time
	var code string
	if rt := md.GetTimeout().AsDuration(); rt > 0 {
		at, code = started.Add(rt), machine.CodeMaxRuntime
	}
	if dl := md.GetTimeouts().GetDeadline().AsDuration(); dl > 0 {
		if end := created.Add(dl); at.IsZero() || end.Before(at) {
			at, code = end, machine.CodeDeadline
		}
	}
	return at, code
}

// BadSpecError: the action's TaskSpec is missing or unreadable; it can
// never run.
type BadSpecError struct{ Err error }

func (e BadSpecError) Error() string { return "the task spec cannot be read: " + e.Err.Error() }

func (e BadSpecError) Unwrap() error { return e.Err }

// Spec loads a's TaskSpec, telling a spec that can never be read
// (BadSpecError) apart from a database that cannot be reached.
func (c *Core) Spec(ctx context.Context, a *store.Action) (*task.TaskSpec, error) {
	spec, err := c.state.Spec(ctx, a)
	if err == nil {
		return spec, nil
	}
	if errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrInvalid) {
		return nil, BadSpecError{err}
	}
	if c.state.SpecStored(ctx, a.SpecDigest) == nil {
		return nil, BadSpecError{err} // stored, but not a TaskSpec
	}
	return nil, err
}

// runInfo is what attempts take from their run (immutable once created).
type runInfo struct {
	// overwriteCache and cacheScope are the run's cache settings.
	overwriteCache bool
	cacheScope     task.CacheLookupScope
	limit          int
	envs           []*core.KeyValuePair
	rawPrefix      string
	start          time.Time
	// recovery is set when the run recovers another (recover.go).
	recovery *recovery
}

// runCache keeps runInfo per run, bounded.
type runCache struct {
	mu   sync.Mutex
	runs map[store.RunKey]*runInfo
}

func newRunCache() *runCache { return &runCache{runs: map[store.RunKey]*runInfo{}} }

// run returns what attempts of run take from the run, cached.
func (c *Core) run(ctx context.Context, run store.RunKey) (*runInfo, error) {
	c.runs.mu.Lock()
	ri := c.runs.runs[run]
	c.runs.mu.Unlock()
	if ri != nil {
		return ri, nil
	}
	root, err := c.state.Get(ctx, run.Action(store.RootName))
	if err != nil {
		return nil, err
	}
	rs := &task.RunSpec{}
	if err := proto.Unmarshal(root.RunSpec, rs); err != nil {
		return nil, fmt.Errorf("run spec of %s is unreadable: %w", run, err)
	}
	ri = &runInfo{
		overwriteCache: rs.GetOverwriteCache() || rs.GetCacheConfig().GetOverwriteCache(),
		cacheScope:     rs.GetCacheConfig().GetCacheLookupScope(),
		limit:          int(rs.GetMaxActionConcurrency()),
		envs:           rs.GetEnvs().GetValues(),
		rawPrefix:      rs.GetRawDataStorage().GetRawDataPrefix(),
		start:          root.CreatedAt,
	}
	if rs.GetRunStartTime() != nil {
		ri.start = rs.GetRunStartTime().AsTime()
	}
	if ri.recovery, err = c.recoveryOf(ctx, run, rs); err != nil {
		return nil, err
	}
	c.runs.mu.Lock()
	if len(c.runs.runs) >= 4096 { // bounded: drop everything rather than track recency
		clear(c.runs.runs)
	}
	c.runs.runs[run] = ri
	c.runs.mu.Unlock()
	return ri, nil
}

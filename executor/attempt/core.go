// Package attempt is the attempt lifecycle every executor driver shares: it
// plans a launch (spec → limits → cache → secrets → the task-process
// contract's values and environment), applies what a driver observed
// (machine transition and fenced store write as one step; the commit wakes
// the watchers) and acts on what follows (slots, a retry's backoff, aborting
// the descendants of what ended). A driver only launches, observes and
// stops: the local driver runs host processes, the kubernetes driver Pods;
// neither decides phases, retries or limits on its own, so the two cannot
// drift apart.
package attempt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Error codes recorded by the core and its drivers besides the machine's and
// the contract's.
const (
	CodeUnsupportedTask = "UnsupportedTaskType"
	CodeBadTaskSpec     = "BadTaskSpec"
	CodeRuntimeNotFound = "RuntimeNotFound"
	CodeLaunchFailed    = "LaunchFailed"
	CodeOOMKilled       = "OOMKilled"
)

// ErrNotWriter: this executor is not the one writer of executor status (a
// standby, or its lease was lost), so it records nothing.
var ErrNotWriter = errors.New("executor: this manager does not hold the executor lease (standby)")

// Options configure a Core.
type Options struct {
	// SystemRetries bounds the retries paid for what the platform did
	// (restarts, launch failures), besides the task's own retries.
	SystemRetries uint32
	// SystemBackoff spaces those retries.
	SystemBackoff machine.Backoff
	// Fence returns the writer's fencing token, 0 when this executor must
	// not write. Every store write carries it, so a writer that lost its
	// lease cannot overwrite its successor's records.
	Fence func() int64
	// Cluster names where attempts run, recorded with each attempt and its
	// events (ClusterLocal, or the Kubernetes cluster's name).
	Cluster string
	// Hooks join planning.
	Hooks

	// What the driver does after a record (after.go).
	//
	// Slots are the driver's capacity; an action's slot is freed when its
	// attempt retries or ends (NewSlots(0), no limit, when nil).
	Slots *Slots
	// Requeue has the driver look at key again after delay: a retry once
	// its backoff passed, an action a freed slot lets start (delay 0).
	Requeue func(key store.ActionKey, delay time.Duration)
	// Ended tells the driver that key ended, for what it keeps of its own.
	Ended func(key store.ActionKey)
	// Log receives what goes wrong after a record (slog.Default when nil).
	Log *slog.Logger
	// Metrics count what the core records (nothing when nil).
	Metrics *Metrics
}

// Core is the shared attempt lifecycle over one run state.
type Core struct {
	state *runstate.Service
	opts  Options
	runs  *runCache
	spans *attemptSpans // trace.go

	mu        sync.Mutex
	notBefore map[store.ActionKey]time.Time // retries waiting for their backoff (Backoff)
	wakes     map[store.ActionKey]*wake     // conditions waiting for their deadline (condition.go)
}

// New builds the core over state.
func New(state *runstate.Service, opts Options) *Core {
	if opts.Fence == nil {
		opts.Fence = func() int64 { return 1 }
	}
	if opts.Slots == nil {
		opts.Slots = NewSlots(0)
	}
	if opts.Requeue == nil {
		opts.Requeue = func(store.ActionKey, time.Duration) {}
	}
	if opts.Ended == nil {
		opts.Ended = func(store.ActionKey) {}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Core{state: state, opts: opts, runs: newRunCache(), spans: newAttemptSpans(opts.Tracer), notBefore: map[store.ActionKey]time.Time{}, wakes: map[store.ActionKey]*wake{}}
}

// State is the run state the core records into.
func (c *Core) State() *runstate.Service { return c.state }

// Record is what a store write carries besides the machine's decision.
type Record struct {
	OutDir   string // the attempt's output prefix, for attempts that ran
	ErrorURI string // the error document, when the task wrote one
	Logs     bool   // the attempt's log exists: record its log links
	// LogLinks are the attempt's log links when Logs is set (a driver's
	// rendered per attempt); none means the manager's own log endpoint.
	LogLinks []*core.TaskLog
	// Cache is the cache status to record (0: as the cache step decides).
	Cache core.CatalogCacheStatus
	// RecoveredFrom names the source run a recovered action took its
	// outputs from.
	RecoveredFrom string
}

// Apply feeds ev to the machine for a and writes the result with a's
// version (errs.ErrConflict when a changed meanwhile); the commit wakes the
// watchers. It returns the action as written (a itself when nothing was
// written) and the machine's decision. spec may be nil (the default policy).
func (c *Core) Apply(ctx context.Context, a *store.Action, spec *task.TaskSpec, ev machine.Event, rec Record) (*store.Action, machine.Decision, error) {
	s := machine.State{Phase: a.Phase, Attempt: uint32(a.Attempts)}
	switch ev.(type) {
	case machine.Failed, machine.Crashed, machine.Orphaned:
		// Retry budgets are counted from the attempts that ended in a retry.
		atts, err := c.state.Attempts(ctx, a.ActionKey)
		if err != nil {
			return nil, nil, err
		}
		s.UserRetries, s.SystemRetries = spentRetries(atts, a.Attempts)
	}
	p := machine.PolicyFor(spec.GetTaskTemplate().GetMetadata(), c.opts.SystemRetries)
	p.SystemBackoff = c.opts.SystemBackoff
	next, dec, err := machine.Transition(s, ev, p)
	if err != nil {
		return nil, nil, fmt.Errorf("%s of %s: %w", ev.Name(), a.ActionKey, err)
	}
	fence := c.opts.Fence()
	if fence == 0 {
		return nil, nil, ErrNotWriter
	}
	var u store.Update
	switch dec := dec.(type) {
	case *machine.Ignored:
		return a, dec, nil
	case *machine.Retry:
		u = store.Update{Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true,
			ErrorInfo: executionError(dec.Cause, rec.ErrorURI), OutputURI: rec.OutDir}
	case *machine.Terminal:
		u = store.Update{Phase: dec.Phase, OutputURI: rec.OutDir, RecoveredFrom: rec.RecoveredFrom}
		if dec.Error != nil {
			u.ErrorInfo = executionError(*dec.Error, rec.ErrorURI)
		}
		if dec.Phase == phase.Aborted && len(a.AbortInfo) == 0 {
			u.AbortInfo, _ = proto.Marshal(&workflow.AbortInfo{Reason: dec.Reason})
		}
		u.CacheStatus = c.finishCache(ctx, a, spec, dec.Phase, rec)
	default:
		if next.Phase == s.Phase && !rec.Logs {
			return a, dec, nil
		}
		u = store.Update{Phase: next.Phase}
	}
	if rec.Logs {
		rec.LogLinks = logLinks(a, rec.LogLinks)
		// The attempt's row keeps its first link: it says the log exists
		// (logs_available); the event below carries every link.
		u.LogInfo, _ = proto.Marshal(rec.LogLinks[0])
	}
	u.Fence = fence
	if _, claim := ev.(machine.Start); claim {
		u.Owner, u.Cluster = fence, c.opts.Cluster
		u.CacheStatus = c.startCacheStatus(ctx, a, spec)
	}
	if u.CacheStatus != nil {
		rec.Cache = core.CatalogCacheStatus(*u.CacheStatus) // the attempt's history shows it too
	}
	u.At = db.Now()
	u.Events = c.eventsFor(a, ev, dec, next.Phase, rec, u.At)
	updated, err := c.state.UpdateFrom(ctx, a, u)
	if err != nil {
		return nil, nil, err
	}
	c.opts.Metrics.observe(a, ev, dec, u.At)
	c.spans.record(a, updated, dec, u.At)
	return updated, dec, nil
}

// logLinks are the links to the log of a's current attempt: the driver's,
// else the manager's own log endpoint, stored as a rooted path that the
// read side completes with each client's base URL (loglink.Resolve).
func logLinks(a *store.Action, links []*core.TaskLog) []*core.TaskLog {
	if len(links) > 0 {
		return links
	}
	return []*core.TaskLog{{Name: loglink.DefaultName, Uri: loglink.Path(runstate.LogAttempt(a.ActionKey, a.Attempts))}}
}

// Fail records a non-recoverable failure of a's current attempt.
func (c *Core) Fail(ctx context.Context, a *store.Action, spec *task.TaskSpec, kind machine.ErrorKind, code, msg string) (*store.Action, machine.Decision, error) {
	return c.Apply(ctx, a, spec, machine.Failed{Attempt: uint32(a.Attempts), Kind: kind, Code: code, Message: msg}, Record{})
}

// spentRetries counts the retries already paid from each budget: every
// attempt before the current one ended in a retry, on the system budget when
// its error is of SYSTEM origin and the task reported none (no error
// document: the platform's doing), else on the user budget (the machine's
// rule).
func spentRetries(atts []store.Attempt, current int32) (user, system uint32) {
	for _, at := range atts {
		if at.Attempt >= current {
			continue
		}
		ee := &core.ExecutionError{}
		if len(at.ErrorInfo) > 0 && proto.Unmarshal(at.ErrorInfo, ee) == nil && ee.GetKind() == core.ExecutionError_SYSTEM && ee.GetErrorUri() == "" {
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

// AbortReason is why a's abort was requested.
func AbortReason(a *store.Action) string {
	ai := &workflow.AbortInfo{}
	if len(a.AbortInfo) > 0 && proto.Unmarshal(a.AbortInfo, ai) == nil && ai.GetReason() != "" {
		return ai.GetReason()
	}
	return "abort requested"
}

// PlatformFailure is the event for an attempt the platform could not launch
// (no directory, no process, no Pod): a recoverable system failure, paid
// from the system budget, not the task's.
func PlatformFailure(n int32, msg string) machine.Failed {
	return machine.Failed{Attempt: uint32(n), Kind: machine.KindSystem, Recoverable: true, Code: CodeLaunchFailed, Message: msg}
}

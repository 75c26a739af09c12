package local

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Recording what happened to an attempt: the machine decides, the store
// keeps it, and what follows (a retry, aborting the children) is queued.

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

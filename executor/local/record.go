package local

import (
	"context"
	"time"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/store"
)

// Recording what happened to an attempt: the machine decides, the store
// keeps it, and what follows (a retry, aborting the children) is queued.

// failPermanently records a non-recoverable failure of a's current attempt.
func (d *Driver) failPermanently(ctx context.Context, a *store.Action, spec *task.TaskSpec, kind machine.ErrorKind, code, msg string) error {
	d.slots.Forget(a.ActionKey)
	d.log.Warn("action cannot run", "action", a.ActionKey.String(), "code", code, "reason", msg)
	updated, dec, err := d.core.Fail(ctx, a, spec, kind, code, msg)
	if err != nil {
		return err
	}
	d.afterRecord(ctx, updated, dec)
	return nil
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
		d.slots.Forget(a.ActionKey)
		d.clearTimes(a.ActionKey)
		if err := d.core.AbortDescendants(ctx, a); err != nil {
			d.log.Warn("aborting the children of an ended action", "action", a.ActionKey.String(), "err", err)
		}
	}
}

func decisionString(dec machine.Decision) string {
	if dec == nil {
		return "none"
	}
	return dec.String()
}

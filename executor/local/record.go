package local

import (
	"context"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/store"
)

// Recording what happened to an attempt: the machine decides, the store
// keeps it, and the attempt core acts on what follows (AfterRecord).

// failPermanently records a non-recoverable failure of a's current attempt.
func (d *Driver) failPermanently(ctx context.Context, a *store.Action, spec *task.TaskSpec, kind machine.ErrorKind, code, msg string) error {
	d.slots.Forget(a.ActionKey)
	d.log.Warn("action cannot run", "action", a.ActionKey.String(), "code", code, "reason", msg)
	updated, dec, err := d.core.Fail(ctx, a, spec, kind, code, msg)
	if err != nil {
		return err
	}
	d.core.AfterRecord(ctx, updated, dec)
	return nil
}

func decisionString(dec machine.Decision) string {
	if dec == nil {
		return "none"
	}
	return dec.String()
}

package attempt

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Condition drives a condition action (runstate's conditions.go), the same
// for every driver: it runs nothing, so there is no attempt to launch or
// watch. The executor's part is what a signal does not do: an abort
// requested ends it ABORTED, and once its deadline passed it ends TIMED_OUT
// (error ConditionTimedOut, of kind USER). Until then it stays PAUSED.
//
// Until its deadline the core holds a timer (one per condition, however
// often the driver looks) that has the driver look again then
// (Options.Requeue). A write that loses to a signal or an abort fails with
// errs.ErrConflict; the driver looks again and finds it ended.
func (c *Core) Condition(ctx context.Context, a *store.Action) error {
	if a.ActionType != store.ActionTypeCondition {
		return fmt.Errorf("action %s is not a condition", a.ActionKey)
	}
	if a.Phase.Terminal() {
		c.Forget(a.ActionKey)
		return nil
	}
	fence := c.opts.Fence()
	if fence == 0 {
		return ErrNotWriter
	}
	if a.AbortRequestedAt == nil && a.ParentName != nil {
		// A condition enqueued while its parent ended was missed by the
		// parent's abort of its children: it waits for nobody.
		parent, err := c.state.Get(ctx, a.RunKey.Action(*a.ParentName))
		if err != nil {
			return err
		}
		if parent.Phase.Terminal() {
			return c.state.Abort(ctx, a.ActionKey, fmt.Sprintf("parent action %s ended %s", parent.Name, parent.Phase), "")
		}
	}
	now := db.Now()
	var u store.Update
	deadline, timed := runstate.ConditionDeadline(a)
	switch {
	case a.AbortRequestedAt != nil:
		u = store.Update{Phase: phase.Aborted}
		if len(a.AbortInfo) == 0 {
			u.AbortInfo, _ = proto.Marshal(&workflow.AbortInfo{Reason: AbortReason(a)})
		}
	case timed && !now.Before(deadline):
		name := runstate.ConditionOf(a).GetName()
		u = store.Update{Phase: phase.TimedOut, ErrorInfo: conditionTimedOut(name, deadline.Sub(a.CreatedAt))}
	case a.Phase != phase.Paused:
		// Created PAUSED; a row in another phase (written by hand, or
		// by an older manager) is brought there.
		u = store.Update{Phase: phase.Paused}
	default:
		if timed {
			c.wakeAt(a.ActionKey, deadline)
		}
		return nil
	}
	u.Fence, u.At = fence, now
	updated, err := c.state.UpdateFrom(ctx, a, u)
	if err != nil {
		return err
	}
	if updated.Phase.Terminal() {
		c.opts.Log.Info("condition ended", "action", a.ActionKey.String(), "phase", updated.Phase.String())
		c.Forget(a.ActionKey)
		c.opts.Ended(a.ActionKey)
	} else if timed {
		c.wakeAt(a.ActionKey, deadline)
	}
	return nil
}

// wakeAt has the driver look at key at t (a condition's deadline), unless
// a timer for t is already set.
func (c *Core) wakeAt(key store.ActionKey, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.wakes[key]; ok {
		if w.at.Equal(t) {
			return
		}
		w.timer.Stop()
	}
	w := &wake{at: t}
	w.timer = time.AfterFunc(time.Until(t), func() {
		c.mu.Lock()
		if c.wakes[key] == w {
			delete(c.wakes, key)
		}
		c.mu.Unlock()
		c.opts.Requeue(key, 0)
	})
	c.wakes[key] = w
}

// wake is a timer that has the driver look at a condition at its deadline.
type wake struct {
	at    time.Time
	timer *time.Timer
}

// conditionTimedOut is the stored error of a condition whose timeout
// passed.
func conditionTimedOut(name string, timeout time.Duration) []byte {
	b, _ := proto.Marshal(&core.ExecutionError{
		Code:           runstate.CodeConditionTimedOut,
		Message:        fmt.Sprintf("condition %q was not signalled within its timeout of %s", name, timeout),
		Kind:           core.ExecutionError_USER,
		Timestamp:      timestamppb.Now(),
		Recoverability: core.ContainerError_NON_RECOVERABLE,
	})
	return b
}

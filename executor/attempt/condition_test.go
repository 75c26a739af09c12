package attempt_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// enqueueCondition enqueues a bool condition named name under root.
func (f *fixture) enqueueCondition(t *testing.T, root *store.Action, name string, timeout time.Duration) *store.Action {
	t.Helper()
	ctx := context.Background()
	parent := root.Name
	c := &workflow.ConditionAction{Name: name, Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_BOOLEAN}}}
	if timeout > 0 {
		c.Timeout = durationpb.New(timeout)
	}
	err := f.state.Enqueue(ctx, &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: &common.RunIdentifier{Project: root.Project, Domain: root.Domain, Name: root.RunName}, Name: name},
		ParentActionName: &parent,
		InputUri:         runlayout.JoinURI(root.RunOutputBase, name, "inputs.pb"),
		RunOutputBase:    root.RunOutputBase,
		Spec:             &actions.Action_Condition{Condition: c},
	})
	if err != nil {
		t.Fatalf("Enqueue %s: %v", name, err)
	}
	a, err := f.state.Get(ctx, root.RunKey.Action(name))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The executor's part of a condition: it stays PAUSED without a write,
// the core wakes the driver at its deadline and then records TIMED_OUT
// (ConditionTimedOut, a user error); an abort ends it ABORTED; one whose
// parent ended is aborted.
func TestCondition(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		woken := make(chan store.ActionKey, 10)
		c := attempt.New(f.state, attempt.Options{Fence: f.hold(t),
			Requeue: func(k store.ActionKey, _ time.Duration) { woken <- k }})
		root := f.run(t, "cond", template("env.main", &core.Container{Args: []string{"a0"}}, nil), nil)

		timed := f.enqueueCondition(t, root, "timed", 50*time.Millisecond)
		if timed.Phase != phase.Paused {
			t.Fatalf("a new condition is %v, want PAUSED", timed.Phase)
		}
		for range 2 { // however often the driver looks, one timer
			if err := c.Condition(ctx, timed); err != nil {
				t.Fatal(err)
			}
		}
		if again, _ := f.state.Get(ctx, timed.ActionKey); again.ResourceVersion != timed.ResourceVersion {
			t.Fatalf("a waiting condition was written: %v", again.Phase)
		}
		select {
		case k := <-woken:
			if k != timed.ActionKey {
				t.Fatalf("woke %v, want %v", k, timed.ActionKey)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the core never woke the driver at the deadline")
		}
		timed, _ = f.state.Get(ctx, timed.ActionKey)
		if err := c.Condition(ctx, timed); err != nil {
			t.Fatal(err)
		}
		timed, _ = f.state.Get(ctx, timed.ActionKey)
		u := runstate.UpdateOf(timed, "")
		if timed.Phase != phase.TimedOut || u.GetError().GetCode() != runstate.CodeConditionTimedOut || u.GetError().GetKind() != core.ExecutionError_USER {
			t.Fatalf("after the deadline: %v, error %v; want TIMED_OUT, ConditionTimedOut of kind USER", timed.Phase, u.GetError())
		}
		select {
		case k := <-woken:
			t.Fatalf("woke %v again: one timer per condition", k)
		default:
		}

		waiting := f.enqueueCondition(t, root, "waiting", 0)
		if err := c.Condition(ctx, waiting); err != nil {
			t.Fatal(err)
		}
		if err := f.state.Abort(ctx, root.ActionKey, "stop", ""); err != nil {
			t.Fatal(err)
		}
		waiting, _ = f.state.Get(ctx, waiting.ActionKey)
		if err := c.Condition(ctx, waiting); err != nil {
			t.Fatal(err)
		}
		if waiting, _ = f.state.Get(ctx, waiting.ActionKey); waiting.Phase != phase.Aborted {
			t.Fatalf("after an abort: %v, want ABORTED", waiting.Phase)
		}

		// Enqueued as its parent ended: the parent's abort of its
		// children missed it.
		other := f.run(t, "late", template("env.main", &core.Container{Args: []string{"a0"}}, nil), nil)
		late := f.enqueueCondition(t, other, "late", time.Hour)
		if _, err := f.state.Update(ctx, other.ActionKey, store.AnyVersion, store.Update{Phase: phase.Failed}); err != nil {
			t.Fatal(err)
		}
		if err := c.Condition(ctx, late); err != nil {
			t.Fatal(err)
		}
		late, _ = f.state.Get(ctx, late.ActionKey)
		if late.AbortRequestedAt == nil {
			t.Fatalf("a condition whose parent ended was not aborted")
		}
		if err := c.Condition(ctx, late); err != nil {
			t.Fatal(err)
		}
		if late, _ = f.state.Get(ctx, late.ActionKey); late.Phase != phase.Aborted {
			t.Fatalf("orphaned condition: %v, want ABORTED", late.Phase)
		}
		c.Forget(late.ActionKey)
	})
}

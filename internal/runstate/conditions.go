package runstate

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// Condition actions (flyte.new_condition, human in the loop). A task
// enqueues one under itself and waits for its terminal update; the action
// runs nothing. It is created PAUSED and stays so until:
//   - SignalEvent gives it a value of its declared type: SUCCEEDED, the
//     value in its SignalInfo, which the waiting task receives inline
//     (ActionUpdate.value);
//   - its timeout passes: TIMED_OUT (the executor, ConditionTimedOut);
//   - it is aborted, with its run or its parent: ABORTED (the executor).
//
// Everything about it is in its row (ConditionSpec, SignalInfo, created_at
// for the deadline), so both executors drive it the same way, with no
// process, Pod or TaskAction. In a run recovering another, a condition
// whose same-named condition of the source run was signalled is created
// RECOVERED with that value: the task does not wait for it again.

// CodeConditionTimedOut is the error code of a condition whose timeout
// passed before it was signalled.
const CodeConditionTimedOut = "ConditionTimedOut"

// Bounds of what a condition carries.
const (
	maxConditionName        = 255
	maxConditionPrompt      = 4096
	maxConditionDescription = 2048
)

// conditionTypes are the value types a condition may declare, as a
// message names one.
var conditionTypes = map[core.SimpleType]string{
	core.SimpleType_BOOLEAN: "a bool",
	core.SimpleType_INTEGER: "an int",
	core.SimpleType_FLOAT:   "a float",
	core.SimpleType_STRING:  "a string",
}

// conditionAction is the new action of a ConditionAction, checked.
func conditionAction(key store.ActionKey, c *workflow.ConditionAction) (store.NewAction, error) {
	switch n := c.GetName(); {
	case n == "":
		return store.NewAction{}, errs.Invalidf("action.condition.name is required")
	case len(n) > maxConditionName || !utf8.ValidString(n):
		return store.NewAction{}, errs.Invalidf("action.condition.name must be valid UTF-8 of at most %d bytes", maxConditionName)
	}
	if _, ok := conditionTypes[c.GetType().GetSimple()]; !ok || c.GetType().GetType() == nil {
		return store.NewAction{}, errs.Invalidf("action.condition.type must be a simple type: BOOLEAN, INTEGER, FLOAT or STRING")
	}
	if len(c.GetPrompt()) > maxConditionPrompt {
		return store.NewAction{}, errs.Invalidf("action.condition.prompt is longer than %d bytes", maxConditionPrompt)
	}
	if len(c.GetDescription()) > maxConditionDescription {
		return store.NewAction{}, errs.Invalidf("action.condition.description is longer than %d bytes", maxConditionDescription)
	}
	if t := c.GetTimeout(); t != nil {
		if t.CheckValid() != nil || t.AsDuration() <= 0 {
			return store.NewAction{}, errs.Invalidf("action.condition.timeout must be a positive duration")
		}
	}
	spec, err := marshal(c)
	if err != nil {
		return store.NewAction{}, errs.Invalidf("action.condition cannot be serialized: %v", err)
	}
	return store.NewAction{Key: key, ActionType: store.ActionTypeCondition, ShortName: c.GetName(),
		Phase: phase.Paused, ConditionSpec: spec}, nil
}

// recoverCondition makes n, a condition of a run that recovers another, a
// RECOVERED one with the value its source was signalled, when the source
// run's same-named action is that condition (same name and type) and it
// was signalled, and the recovery does not force it to run again.
func (s *Service) recoverCondition(ctx context.Context, n *store.NewAction) error {
	rs, err := s.RunSpec(ctx, n.Key.RunKey)
	if err != nil {
		return err
	}
	r, ok := RecoveryOf(n.Key.RunKey, rs)
	if !ok || r.Forced[n.Key.Name] {
		return nil
	}
	src, err := s.store.Actions.Get(ctx, r.Source.Action(n.Key.Name))
	if errors.Is(err, errs.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if src.ActionType != store.ActionTypeCondition || len(src.SignalInfo) == 0 ||
		(src.Phase != phase.Succeeded && src.Phase != phase.Recovered) {
		return nil
	}
	was, now := ConditionOf(src), &workflow.ConditionAction{}
	if proto.Unmarshal(n.ConditionSpec, now) != nil || was.GetName() != now.GetName() || !proto.Equal(was.GetType(), now.GetType()) {
		return nil
	}
	n.Phase, n.SignalInfo, n.RecoveredFrom = phase.Recovered, src.SignalInfo, src.RunName
	return nil
}

// ConditionOf is a condition action's ConditionAction (nil for others, or
// when unreadable).
func ConditionOf(a *store.Action) *workflow.ConditionAction {
	if a.ActionType != store.ActionTypeCondition || len(a.ConditionSpec) == 0 {
		return nil
	}
	c := &workflow.ConditionAction{}
	if proto.Unmarshal(a.ConditionSpec, c) != nil {
		return nil
	}
	return c
}

// signalOf is the value a condition was signalled (nil when it was not).
func signalOf(a *store.Action) *workflow.SignalInfo {
	if len(a.SignalInfo) == 0 {
		return nil
	}
	si := &workflow.SignalInfo{}
	if proto.Unmarshal(a.SignalInfo, si) != nil {
		return nil
	}
	return si
}

// ConditionDeadline is when a condition times out: its creation plus its
// timeout. ok is false for a condition that waits as long as it takes.
func ConditionDeadline(a *store.Action) (deadline time.Time, ok bool) {
	t := ConditionOf(a).GetTimeout()
	if t == nil || t.AsDuration() <= 0 {
		return time.Time{}, false
	}
	return a.CreatedAt.Add(t.AsDuration()), true
}

// maxSignalTries bounds Signal's retries when the action moves under it
// (the executor recording PAUSED, another signal).
const maxSignalTries = 5

// Signal gives the condition key its value (RunService.SignalEvent):
// value must be a primitive of the condition's declared type
// (errs.ErrInvalid otherwise, and nothing changes). A condition that ended
// is not signalled again: the same value once more is a success, anything
// else errs.ErrPrecondition, as is signalling an action that is not a
// condition. parentName, when given, must be the condition's parent.
func (s *Service) Signal(ctx context.Context, key store.ActionKey, parentName string, value *core.Literal, by string) error {
	for try := 1; ; try++ {
		a, err := s.store.Actions.Get(ctx, key)
		if err != nil {
			return err
		}
		if a.ActionType != store.ActionTypeCondition {
			return fmt.Errorf("action %s is not a condition, so it takes no signal: %w", key.Name, errs.ErrPrecondition)
		}
		if parentName != "" && (a.ParentName == nil || *a.ParentName != parentName) {
			return errs.Invalidf("parent_action_name: %s is not the parent of condition action %s", parentName, key.Name)
		}
		c := ConditionOf(a)
		if err := checkSignal(c, value); err != nil {
			return err
		}
		if a.Phase.Terminal() {
			if (a.Phase == phase.Succeeded || a.Phase == phase.Recovered) && proto.Equal(signalOf(a).GetOutput(), value) {
				return nil // the same signal again
			}
			return fmt.Errorf("condition %q (action %s) already ended %s: %w", c.GetName(), key.Name, phaseName(a.Phase, false), errs.ErrPrecondition)
		}
		if a.AbortRequestedAt != nil {
			return fmt.Errorf("condition %q (action %s) is being aborted: %w", c.GetName(), key.Name, errs.ErrPrecondition)
		}
		info, err := marshal(&workflow.SignalInfo{SignalledBy: userIdentity(by), Output: value})
		if err != nil {
			return err
		}
		_, err = s.store.Actions.Update(ctx, key, a.ResourceVersion, store.Update{Phase: phase.Succeeded, SignalInfo: info})
		if errors.Is(err, errs.ErrConflict) && try < maxSignalTries {
			continue // it moved: look again
		}
		return err
	}
}

// checkSignal refuses a value that is not a primitive of c's type.
func checkSignal(c *workflow.ConditionAction, v *core.Literal) error {
	want := c.GetType().GetSimple()
	var got core.SimpleType
	switch v.GetScalar().GetPrimitive().GetValue().(type) {
	case *core.Primitive_Boolean:
		got = core.SimpleType_BOOLEAN
	case *core.Primitive_Integer:
		got = core.SimpleType_INTEGER
	case *core.Primitive_FloatValue:
		got = core.SimpleType_FLOAT
	case *core.Primitive_StringValue:
		got = core.SimpleType_STRING
	default:
		return errs.Invalidf("payload: a value (bool, int, float or string) is required")
	}
	if got != want {
		return errs.Invalidf("payload: condition %q takes %s, not %s", c.GetName(), conditionTypes[want], conditionTypes[got])
	}
	return nil
}

// conditionOutputs are a signalled condition's outputs as GetActionData
// shows them: its value, named o0 like a task's first output.
func conditionOutputs(a *store.Action) *task.Outputs {
	si := signalOf(a)
	if si.GetOutput() == nil {
		return nil
	}
	return &task.Outputs{Literals: []*task.NamedLiteral{{Name: "o0", Value: si.GetOutput()}}}
}

package runstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// condition is a condition action named name under parent, of type t.
func condition(t *testing.T, e *env, runName, parent, name string, typ core.SimpleType) *actions.Action {
	t.Helper()
	a := child(t, e, runName, parent, name)
	a.Spec = &actions.Action_Condition{Condition: &workflow.ConditionAction{
		Name: "approve-" + name, Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: typ}},
		Prompt: "Approve?", Timeout: durationpb.New(time.Hour),
	}}
	return a
}

func boolLit(b bool) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Boolean{Boolean: b}}}}}}
}

func intLit(n int64) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: n}}}}}}
}

// TestConditionSignal: a condition is created PAUSED and listed as one; a
// wrong-typed signal is refused and changes nothing; the right one ends it
// SUCCEEDED with the value inline in its update, details and data; the
// same signal again is a success, another one is refused.
func TestConditionSignal(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "rc")
		run := store.RunKey{Project: "p", Domain: "development", RunName: "rc"}
		key := run.Action("c1")
		if err := e.state.Enqueue(ctx, condition(t, e, "rc", "a0", "c1", core.SimpleType_BOOLEAN)); err != nil {
			t.Fatal(err)
		}
		a, err := e.st.Actions.Get(ctx, key)
		if err != nil || a.Phase != phase.Paused || a.ActionType != store.ActionTypeCondition {
			t.Fatalf("condition = %+v, %v; want PAUSED of type CONDITION", a, err)
		}
		paused, _, err := e.state.ListRuns(ctx, store.RunFilter{Project: "p", Domain: "development", Paused: true}, store.Page{})
		if err != nil || len(paused) != 1 {
			t.Fatalf("paused runs = %d, %v; want rc", len(paused), err)
		}
		listed, _, err := e.state.ListActions(ctx, run, store.ActionFilter{Types: []store.ActionType{store.ActionTypeCondition}}, store.Page{})
		if err != nil || len(listed) != 1 || listed[0].GetMetadata().GetCondition().GetName() != "approve-c1" ||
			listed[0].GetMetadata().GetCondition().GetType().GetSimple() != core.SimpleType_BOOLEAN {
			t.Fatalf("conditions listed = %v, %v", listed, err)
		}

		if err := e.state.Signal(ctx, key, "a0", intLit(3), ""); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("int to a bool condition: %v, want ErrInvalid", err)
		}
		if err := e.state.Signal(ctx, key, "nope", boolLit(true), ""); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("wrong parent: %v, want ErrInvalid", err)
		}
		if again, _ := e.st.Actions.Get(ctx, key); again.Phase != phase.Paused || again.ResourceVersion != a.ResourceVersion {
			t.Fatalf("a refused signal changed the condition: %v at %d", again.Phase, again.ResourceVersion)
		}
		if err := e.state.Signal(ctx, key, "a0", boolLit(true), ""); err != nil {
			t.Fatalf("signal: %v", err)
		}
		done, err := e.st.Actions.Get(ctx, key)
		if err != nil || done.Phase != phase.Succeeded {
			t.Fatalf("after the signal: %v, %v; want SUCCEEDED", done.Phase, err)
		}
		if u := runstate.UpdateOf(done, ""); !proto.Equal(u.GetValue(), boolLit(true)) || u.GetOutputUri() != "" {
			t.Fatalf("update = %v; want the value inline and no output_uri", u)
		}
		d, err := e.state.Details(ctx, done)
		if err != nil || !proto.Equal(d.GetSignalInfo().GetOutput(), boolLit(true)) || d.GetCondition().GetPrompt() != "Approve?" {
			t.Fatalf("details = %v, %v", d, err)
		}
		data, err := e.state.Data(ctx, &common.ActionIdentifier{Run: runID("rc"), Name: "c1"})
		if err != nil || !proto.Equal(data.Outputs.GetLiterals()[0].GetValue(), boolLit(true)) {
			t.Fatalf("data = %v, %v", data.Outputs, err)
		}
		if err := e.state.Signal(ctx, key, "a0", boolLit(true), ""); err != nil {
			t.Fatalf("the same signal again: %v, want success", err)
		}
		if err := e.state.Signal(ctx, key, "", boolLit(false), ""); !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("another value after the first: %v, want ErrPrecondition", err)
		}
		if err := e.state.Signal(ctx, run.Action(store.RootName), "", boolLit(true), ""); !errors.Is(err, errs.ErrPrecondition) {
			t.Fatalf("signal to a task: %v, want ErrPrecondition", err)
		}
		if err := e.state.Signal(ctx, run.Action("missing"), "", boolLit(true), ""); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("signal to nothing: %v, want ErrNotFound", err)
		}
	})
}

// TestConditionBadSpec: what a condition must declare.
func TestConditionBadSpec(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "rb")
		for name, edit := range map[string]func(*workflow.ConditionAction){
			"no name": func(c *workflow.ConditionAction) { c.Name = "" },
			"no type": func(c *workflow.ConditionAction) { c.Type = nil },
			"a list type": func(c *workflow.ConditionAction) {
				c.Type = &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_DATETIME}}
			},
			"negative timeout": func(c *workflow.ConditionAction) { c.Timeout = durationpb.New(-time.Second) },
		} {
			a := condition(t, e, "rb", "a0", "c", core.SimpleType_BOOLEAN)
			edit(a.GetCondition())
			if err := e.state.Enqueue(ctx, a); !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
	})
}

// TestConditionRecovered: a run recovering another re-uses the value its
// condition was signalled: the same-named condition is created RECOVERED
// with it, unless the recovery forces it to run again.
func TestConditionRecovered(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "src")
		src := store.RunKey{Project: "p", Domain: "development", RunName: "src"}
		if err := e.state.Enqueue(ctx, condition(t, e, "src", "a0", "c1", core.SimpleType_INTEGER)); err != nil {
			t.Fatal(err)
		}
		if err := e.state.Signal(ctx, src.Action("c1"), "a0", intLit(42), ""); err != nil {
			t.Fatal(err)
		}
		if err := e.state.Enqueue(ctx, condition(t, e, "src", "a0", "c2", core.SimpleType_INTEGER)); err != nil {
			t.Fatal(err)
		}
		root, _ := e.st.Actions.Get(ctx, src.Action(store.RootName))
		if _, err := e.state.Update(ctx, root.ActionKey, store.AnyVersion, store.Update{Phase: phase.Failed}); err != nil {
			t.Fatal(err)
		}
		for _, forced := range []bool{false, true} {
			name := "rec"
			rs := &task.RunSpec{Relation: &common.Relation{RelationType: common.RelationType_RELATION_TYPE_RECOVER, RelatedTo: runID("src")}}
			if forced {
				name = "forced"
				rs.Recover = &task.Recover{ForceRerunActions: []string{"c1"}}
			}
			if _, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:   &workflow.CreateRunRequest_RunId{RunId: runID(name)},
				Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")}, RunSpec: rs,
			}); err != nil {
				t.Fatal(err)
			}
			run := store.RunKey{Project: "p", Domain: "development", RunName: name}
			for _, c := range []string{"c1", "c2"} {
				if err := e.state.Enqueue(ctx, condition(t, e, name, "a0", c, core.SimpleType_INTEGER)); err != nil {
					t.Fatal(err)
				}
			}
			c1, _ := e.st.Actions.Get(ctx, run.Action("c1"))
			c2, _ := e.st.Actions.Get(ctx, run.Action("c2"))
			if c2.Phase != phase.Paused {
				t.Errorf("%s: a condition never signalled in the source is %v, want PAUSED", name, c2.Phase)
			}
			if forced {
				if c1.Phase != phase.Paused {
					t.Errorf("forced: c1 is %v, want PAUSED", c1.Phase)
				}
				continue
			}
			if u := runstate.UpdateOf(c1, ""); c1.Phase != phase.Recovered || c1.RecoveredFrom != "src" || !proto.Equal(u.GetValue(), intLit(42)) {
				t.Errorf("recovered c1 = %v from %q, update %v; want RECOVERED from src with 42", c1.Phase, c1.RecoveredFrom, u)
			}
		}
	})
}

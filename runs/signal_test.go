package runs_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/store"
)

// SignalEvent turns each payload kind into the primitive literal the
// waiting task receives, and refuses what is not a value of the
// condition's type with InvalidArgument.
func TestSignalEventPayloads(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		ctx := context.Background()
		run := rid("", "p", "development", "rsig")
		h.createRun(t, run, "env.main")
		root, err := h.st.Actions.Get(ctx, runKeyOf(run).Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		condition := func(name string, typ core.SimpleType) *common.ActionIdentifier {
			id := &common.ActionIdentifier{Run: run, Name: name}
			err := h.state.Enqueue(ctx, &actions.Action{
				ActionId: id, ParentActionName: proto.String("a0"),
				InputUri: root.RunOutputBase + "/" + name + "/inputs.pb", RunOutputBase: root.RunOutputBase,
				Spec: &actions.Action_Condition{Condition: &workflow.ConditionAction{
					Name: name, Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: typ}}}},
			})
			if err != nil {
				t.Fatalf("enqueue condition %s: %v", name, err)
			}
			return id
		}
		signal := func(id *common.ActionIdentifier, p *workflow.EventPayload) error {
			_, err := h.runs.SignalEvent(ctx, connect.NewRequest(&workflow.SignalEventRequest{ActionId: id, ParentActionName: "a0", Payload: p}))
			return err
		}
		ratio, word := condition("ratio", core.SimpleType_FLOAT), condition("word", core.SimpleType_STRING)

		for what, err := range map[string]error{
			"no payload":          signal(ratio, nil),
			"an int for a float":  signal(ratio, &workflow.EventPayload{Value: &workflow.EventPayload_IntValue{IntValue: 1}}),
			"a bool for a string": signal(word, &workflow.EventPayload{Value: &workflow.EventPayload_BoolValue{BoolValue: true}}),
			"no action id":        signal(nil, &workflow.EventPayload{Value: &workflow.EventPayload_StringValue{StringValue: "x"}}),
			"a malformed parent name": func() error {
				_, err := h.runs.SignalEvent(ctx, connect.NewRequest(&workflow.SignalEventRequest{ActionId: word, ParentActionName: "../a0", Payload: &workflow.EventPayload{Value: &workflow.EventPayload_StringValue{StringValue: "x"}}}))
				return err
			}(),
		} {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("%s: %v, want InvalidArgument", what, err)
			}
		}
		if err := signal(ratio, &workflow.EventPayload{Value: &workflow.EventPayload_FloatValue{FloatValue: 0.25}}); err != nil {
			t.Fatalf("a float: %v", err)
		}
		if err := signal(word, &workflow.EventPayload{Value: &workflow.EventPayload_StringValue{StringValue: "ship it"}}); err != nil {
			t.Fatalf("a string: %v", err)
		}
		for id, want := range map[*common.ActionIdentifier]*core.Primitive{
			ratio: {Value: &core.Primitive_FloatValue{FloatValue: 0.25}},
			word:  {Value: &core.Primitive_StringValue{StringValue: "ship it"}},
		} {
			d, err := h.runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: id}))
			if err != nil {
				t.Fatal(err)
			}
			got := d.Msg.GetDetails()
			if got.GetStatus().GetPhase() != common.ActionPhase_ACTION_PHASE_SUCCEEDED || !proto.Equal(got.GetSignalInfo().GetOutput().GetScalar().GetPrimitive(), want) {
				t.Errorf("%s after its signal: %v with %v, want SUCCEEDED with %v", id.GetName(), got.GetStatus().GetPhase(), got.GetSignalInfo(), want)
			}
		}
	})
}

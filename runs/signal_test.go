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
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/store"
	"fmgr.dev/runs"
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

// With auth on, who signalled a condition and who aborted a run are the
// authenticated callers; with it off (no principal), nobody is recorded.
func TestSignalledByAndAbortedByAreTheCaller(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		ctx := context.Background()
		as := authn.WithPrincipal(ctx, authn.Principal{Subject: "apikey:fmk0123", Kind: authn.KindAPIKey})
		svc := runs.NewRunService(h.state) // in process: the principal is what the auth interceptor puts in ctx
		run := rid("", "p", "development", "rwho")
		h.createRun(t, run, "env.main")
		root, err := h.st.Actions.Get(ctx, runKeyOf(run).Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"ok", "anon"} {
			err := h.state.Enqueue(ctx, &actions.Action{
				ActionId: &common.ActionIdentifier{Run: run, Name: name}, ParentActionName: proto.String("a0"),
				InputUri: root.RunOutputBase + "/" + name + "/inputs.pb", RunOutputBase: root.RunOutputBase,
				Spec: &actions.Action_Condition{Condition: &workflow.ConditionAction{
					Name: name, Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_BOOLEAN}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		yes := &workflow.EventPayload{Value: &workflow.EventPayload_BoolValue{BoolValue: true}}
		for name, c := range map[string]context.Context{"ok": as, "anon": ctx} {
			if _, err := svc.SignalEvent(c, connect.NewRequest(&workflow.SignalEventRequest{
				ActionId: &common.ActionIdentifier{Run: run, Name: name}, ParentActionName: "a0", Payload: yes})); err != nil {
				t.Fatal(err)
			}
		}
		by := func(name string) string {
			d, err := h.runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: &common.ActionIdentifier{Run: run, Name: name}}))
			if err != nil {
				t.Fatal(err)
			}
			return d.Msg.GetDetails().GetSignalInfo().GetSignalledBy().GetUser().GetId().GetSubject()
		}
		if s := by("ok"); s != "apikey:fmk0123" {
			t.Errorf("signalled_by = %q, want the caller", s)
		}
		if s := by("anon"); s != "" {
			t.Errorf("signalled_by without auth = %q, want none", s)
		}
		if _, err := svc.AbortRun(as, connect.NewRequest(&workflow.AbortRunRequest{RunId: run, Reason: proto.String("enough")})); err != nil {
			t.Fatal(err)
		}
		// The abort is recorded at once; the root ends ABORTED when an
		// executor stops it (none runs here).
		a0, err := h.st.Actions.Get(ctx, runKeyOf(run).Action(store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		info := &workflow.AbortInfo{}
		if err := proto.Unmarshal(a0.AbortInfo, info); err != nil || info.GetAbortedBy().GetUser().GetId().GetSubject() != "apikey:fmk0123" {
			t.Errorf("abort info %v (%v), want aborted_by the caller", info, err)
		}
	})
}

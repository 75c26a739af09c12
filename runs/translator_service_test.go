package runs_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
)

// The translator refuses what it cannot translate with INVALID_ARGUMENT
// naming the field (and NOT_FOUND for an action that does not exist), and
// reads a run's inputs by its action only from the run's own data.
func TestTranslatorRefusals(t *testing.T) {
	eachDatabase(t, autoCreateProjects, func(t *testing.T, h *harness) {
		ctx := context.Background()
		run := rid("", "p", "development", "r1")
		h.createRun(t, run, "env.main")
		action := &common.ActionIdentifier{Run: run, Name: "a0"}
		intVars := &core.VariableMap{Variables: []*core.VariableEntry{{Key: "x", Value: &core.Variable{
			Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}
		str := func(m map[string]any) *structpb.Struct {
			s, err := structpb.NewStruct(m)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		for name, req := range map[string]*workflow.LiteralsToLaunchFormJsonRequest{
			"uri without action": {Variables: intVars, LiteralsUri: "file:///etc/passwd"},
			"uri of another run": {Variables: intVars, LiteralsUri: "file:///etc/passwd", Owner: &workflow.LiteralsToLaunchFormJsonRequest_ActionId{ActionId: action}},
			"trigger":            {Variables: intVars, Owner: &workflow.LiteralsToLaunchFormJsonRequest_TriggerId{TriggerId: &common.TriggerIdentifier{}}},
			"literals and owner": {Variables: intVars, Literals: []*task.NamedLiteral{{Name: "x"}}, Owner: &workflow.LiteralsToLaunchFormJsonRequest_ActionId{ActionId: action}},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := h.translator.LiteralsToLaunchFormJson(ctx, connect.NewRequest(req))
				wantCode(t, err, connect.CodeInvalidArgument)
			})
		}
		_, err := h.translator.LiteralsToLaunchFormJson(ctx, connect.NewRequest(&workflow.LiteralsToLaunchFormJsonRequest{
			Variables: intVars, Owner: &workflow.LiteralsToLaunchFormJsonRequest_ActionId{ActionId: &common.ActionIdentifier{Run: run, Name: "a7"}}}))
		wantCode(t, err, connect.CodeNotFound)
		// The run's own inputs (none were stored for this run: an empty form).
		form, err := h.translator.LiteralsToLaunchFormJson(ctx, connect.NewRequest(&workflow.LiteralsToLaunchFormJsonRequest{
			Variables: intVars, Owner: &workflow.LiteralsToLaunchFormJsonRequest_ActionId{ActionId: action}}))
		if err != nil || form.Msg.GetJson().GetFields()["title"].GetStringValue() != "Launch Form" {
			t.Fatalf("the run's form: %v, %v", form, err)
		}

		_, err = h.translator.JsonValuesToLiterals(ctx, connect.NewRequest(&workflow.JsonValuesToLiteralsRequest{Variables: intVars, Values: str(map[string]any{"x": 1.5})}))
		wantCode(t, err, connect.CodeInvalidArgument, `input "x"`, "integer")
		_, err = h.translator.JsonValuesToLiterals(ctx, connect.NewRequest(&workflow.JsonValuesToLiteralsRequest{Variables: intVars, Values: str(map[string]any{})}))
		wantCode(t, err, connect.CodeInvalidArgument, `input "x"`, "required")
		_, err = h.translator.LaunchFormJsonToLiterals(ctx, connect.NewRequest(&workflow.LaunchFormJsonToLiteralsRequest{Json: str(map[string]any{
			"properties": map[string]any{"when": map[string]any{"type": "string", "format": "datetime", "default": "yesterday"}}})}))
		wantCode(t, err, connect.CodeInvalidArgument, `input "when"`, "RFC 3339")
		_, err = h.translator.LaunchFormJsonToLiterals(ctx, connect.NewRequest(&workflow.LaunchFormJsonToLiteralsRequest{}))
		wantCode(t, err, connect.CodeInvalidArgument, "json")
		_, err = h.translator.TaskSpecToLaunchFormJson(ctx, connect.NewRequest(&workflow.TaskSpecToLaunchFormJsonRequest{}))
		wantCode(t, err, connect.CodeInvalidArgument, "task_spec")
	})
}

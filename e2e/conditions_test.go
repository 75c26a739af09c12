package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/testkit"
)

// Conditions (human in the loop): tasks waiting on flyte.new_condition are
// PAUSED until a signal gives them a value of the declared type, through
// the CLI (`flyte signal condition`) and the SDK (remote.Condition.signal).

// conditionActions lists run's condition actions as Condition.listall asks
// for them (ListActions filtered on action_type 3).
func conditionActions(ctx context.Context, m *manager, run string) ([]*workflow.Action, error) {
	resp, err := runClient(m).ListActions(ctx, connect.NewRequest(&workflow.ListActionsRequest{
		RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: run},
		Request: &common.ListRequest{Limit: 100, Filters: []*common.Filter{
			{Function: common.Filter_EQUAL, Field: "action_type", Values: []string{"3"}},
		}},
	}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetActions(), nil
}

// waitConditions polls until run has the conditions named by want in the
// given phases and returns their actions by condition name.
func waitConditions(t *testing.T, ctx context.Context, m *manager, run string, want map[string]common.ActionPhase) map[string]*workflow.Action {
	t.Helper()
	var got map[string]*workflow.Action
	if msg := testkit.Poll(4*time.Minute, 300*time.Millisecond, func() string {
		acts, err := conditionActions(ctx, m, run)
		if err != nil {
			return "ListActions: " + err.Error()
		}
		got = map[string]*workflow.Action{}
		var seen []string
		for _, a := range acts {
			if a.GetMetadata().GetActionType() != workflow.ActionType_ACTION_TYPE_CONDITION {
				return fmt.Sprintf("the action_type filter let %s of type %v through", a.GetId().GetName(), a.GetMetadata().GetActionType())
			}
			name := a.GetMetadata().GetCondition().GetName()
			got[name] = a
			seen = append(seen, name+" "+phaseName(a.GetStatus().GetPhase()))
		}
		for name, p := range want {
			if got[name].GetStatus().GetPhase() != p {
				return fmt.Sprintf("run %s: conditions %v, want %s %s", run, seen, name, phaseName(p))
			}
		}
		return ""
	}); msg != "" {
		t.Fatalf("%s", msg)
	}
	return got
}

// pausedRuns are the runs of the test project that ListRuns with
// paused_actions_only finds.
func pausedRuns(t *testing.T, ctx context.Context, m *manager) []string {
	t.Helper()
	resp, err := runClient(m).ListRuns(ctx, connect.NewRequest(&workflow.ListRunsRequest{
		Request:           &common.ListRequest{Limit: 200},
		ScopeBy:           &workflow.ListRunsRequest_ProjectId{ProjectId: projectID()},
		PausedActionsOnly: true,
	}))
	if err != nil {
		t.Fatalf("ListRuns(paused_actions_only): %v", err)
	}
	var out []string
	for _, r := range resp.Msg.GetRuns() {
		out = append(out, r.GetAction().GetId().GetRun().GetName())
	}
	return out
}

func testConditions(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	dir := t.TempDir()
	cliConfig(t, ctx, m, dir)
	var started struct{ Runs map[string]string }
	driver(t, ctx, &started, "drive_conditions.py", "start", sdkEndpoint(m))
	approve, expire, forever := started.Runs["approve"], started.Runs["expire"], started.Runs["forever"]

	const paused = common.ActionPhase_ACTION_PHASE_PAUSED
	conds := waitConditions(t, ctx, m, approve, map[string]common.ActionPhase{"approve": paused, "count": paused})
	waitConditions(t, ctx, m, forever, map[string]common.ActionPhase{"forever": paused})
	if runs := pausedRuns(t, ctx, m); !slices.Contains(runs, approve) || !slices.Contains(runs, forever) {
		t.Errorf("ListRuns(paused_actions_only) = %v, want %s and %s among them", runs, approve, forever)
	}
	if p, err := runPhase(t, ctx, m, approve); err != nil || phaseName(p) != "RUNNING" {
		t.Errorf("run %s waiting on its conditions is %v (%v), want RUNNING", approve, p, err)
	}

	// The SDK finds them as the user declared them.
	var listed struct{ Conditions []map[string]string }
	driver(t, ctx, &listed, "drive_conditions.py", "list", sdkEndpoint(m), approve)
	checkJSON(t, "Condition.listall", listed.Conditions, fmt.Sprintf(`[
		{"name":"approve","action":%q,"parent":"a0","phase":"PAUSED","type":"bool"},
		{"name":"count","action":%q,"parent":"a0","phase":"PAUSED","type":"int"}]`,
		conds["approve"].GetId().GetName(), conds["count"].GetId().GetName()))

	// A wrong type is refused and changes nothing: an int for the bool
	// (the Go client), a string for the int (the SDK).
	_, err := runClient(m).SignalEvent(ctx, connect.NewRequest(&workflow.SignalEventRequest{
		ActionId: conds["approve"].GetId(), ParentActionName: "a0",
		Payload: &workflow.EventPayload{Value: &workflow.EventPayload_IntValue{IntValue: 1}},
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "bool") {
		t.Errorf("an int for a bool condition: %v, want InvalidArgument naming the type", err)
	}
	var refused struct{ Error string }
	driver(t, ctx, &refused, "drive_conditions.py", "signal", sdkEndpoint(m), approve, "count", `"many"`)
	if !strings.Contains(refused.Error, "takes an int, not a string") {
		t.Errorf("a string for an int condition through the SDK: %q, want InvalidArgument", refused.Error)
	}
	waitConditions(t, ctx, m, approve, map[string]common.ActionPhase{"approve": paused, "count": paused})

	// The CLI signals the bool, the SDK the int: the task continues with both.
	out := mustFlyte(t, ctx, dir, "signal", "condition", approve, conds["approve"].GetId().GetName(), "true")
	if !strings.Contains(out, "has been signaled") {
		t.Errorf("flyte signal condition printed:\n%s", out)
	}
	var sent struct{ Error string }
	driver(t, ctx, &sent, "drive_conditions.py", "signal", sdkEndpoint(m), approve, "count", "41")
	if sent.Error != "" {
		t.Fatalf("Condition.signal(41): %s", sent.Error)
	}
	var res struct {
		Phase, Error string
		Output       any
	}
	driver(t, ctx, &res, "drive_conditions.py", "outcome", sdkEndpoint(m), approve)
	if res.Phase != "SUCCEEDED" || res.Output != "True:42" {
		t.Errorf("run %s after the signals: %s %v %s, want SUCCEEDED with \"True:42\"", approve, res.Phase, res.Output, res.Error)
	}
	done := common.ActionPhase_ACTION_PHASE_SUCCEEDED
	waitConditions(t, ctx, m, approve, map[string]common.ActionPhase{"approve": done, "count": done})
	// Signalled is final: the same value again is fine, another is not.
	again := func(v bool) error {
		_, err := runClient(m).SignalEvent(ctx, connect.NewRequest(&workflow.SignalEventRequest{
			ActionId: conds["approve"].GetId(), ParentActionName: "a0",
			Payload: &workflow.EventPayload{Value: &workflow.EventPayload_BoolValue{BoolValue: v}},
		}))
		return err
	}
	if err := again(true); err != nil {
		t.Errorf("the same signal again: %v, want OK", err)
	}
	if err := again(false); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("another value after the first: %v, want FailedPrecondition", err)
	}
	details, err := runClient(m).GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: conds["count"].GetId()}))
	if err != nil || details.Msg.GetDetails().GetSignalInfo().GetOutput().GetScalar().GetPrimitive().GetInteger() != 41 ||
		details.Msg.GetDetails().GetCondition().GetPrompt() != "**How many?**" {
		t.Errorf("details of the signalled count: %v, %v", details, err)
	}

	// Recovering the run re-uses the values: the task's conditions are
	// RECOVERED at once, and nobody signals anything.
	var rec struct {
		Run, Phase, Error string
		Output            any
		Conditions        []map[string]string
	}
	driver(t, ctx, &rec, "drive_conditions.py", "recover", sdkEndpoint(m), approve)
	if rec.Phase != "SUCCEEDED" || rec.Output != "True:42" {
		t.Errorf("recovered run %s: %s %v %s, want SUCCEEDED with \"True:42\" from the recovered values", rec.Run, rec.Phase, rec.Output, rec.Error)
	}
	checkJSON(t, "the recovered run's conditions", rec.Conditions, fmt.Sprintf(`[
		{"name":"approve","action":%q,"parent":"a0","phase":"RECOVERED","type":"bool"},
		{"name":"count","action":%q,"parent":"a0","phase":"RECOVERED","type":"int"}]`,
		conds["approve"].GetId().GetName(), conds["count"].GetId().GetName()))

	// Nobody signals: TIMED_OUT, and the task gets ConditionTimedoutError.
	driver(t, ctx, &res, "drive_conditions.py", "outcome", sdkEndpoint(m), expire)
	if res.Phase != "SUCCEEDED" || res.Output != "timed out" {
		t.Errorf("run %s: %s %v %s, want SUCCEEDED with \"timed out\" (the task caught ConditionTimedoutError)", expire, res.Phase, res.Output, res.Error)
	}
	timed := waitConditions(t, ctx, m, expire, map[string]common.ActionPhase{"expire": common.ActionPhase_ACTION_PHASE_TIMED_OUT})
	details, err = runClient(m).GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: timed["expire"].GetId()}))
	if err != nil || !strings.Contains(details.Msg.GetDetails().GetErrorInfo().GetMessage(), "ConditionTimedOut") ||
		details.Msg.GetDetails().GetErrorInfo().GetKind() != workflow.ErrorInfo_KIND_USER {
		t.Errorf("details of the timed-out condition: %v, %v; want a USER error ConditionTimedOut", details, err)
	}

	// Aborting the run ends its waiting condition ABORTED.
	if _, err := runClient(m).AbortRun(ctx, connect.NewRequest(&workflow.AbortRunRequest{
		RunId: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: forever},
	})); err != nil {
		t.Fatalf("AbortRun: %v", err)
	}
	waitConditions(t, ctx, m, forever, map[string]common.ActionPhase{"forever": common.ActionPhase_ACTION_PHASE_ABORTED})
	if p := waitRun(t, ctx, m, forever); p != "ABORTED" {
		t.Errorf("run %s aborted while waiting: %s, want ABORTED", forever, p)
	}
	if runs := pausedRuns(t, ctx, m); slices.Contains(runs, approve) || slices.Contains(runs, forever) {
		t.Errorf("ListRuns(paused_actions_only) = %v after the conditions ended, want neither %s nor %s", runs, approve, forever)
	}
	// The example of docs/conditions.md, as its docstring runs it.
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))
	if out, err := venvCommand(t, ctx, dir, "python", "examples/approval.py").CombinedOutput(); err != nil || !strings.Contains(string(out), "1.2: released") {
		t.Errorf("python examples/approval.py: %v, want it to print \"1.2: released\":\n%s", err, out)
	}
	// A task is no condition.
	_, err = runClient(m).SignalEvent(ctx, connect.NewRequest(&workflow.SignalEventRequest{
		ActionId: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: testProject, Domain: testDomain, Name: approve}, Name: "a0"},
		Payload:  &workflow.EventPayload{Value: &workflow.EventPayload_BoolValue{BoolValue: true}},
	}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		t.Errorf("signalling a task: %v, want FailedPrecondition", err)
	}
}

// Conditions live in the database: a manager killed (SIGKILL) while tasks
// wait on them comes back with them still PAUSED, the task's retried
// attempt registers them again (the same actions), and signals after the
// restart complete the run with their values.
func TestConditionsRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			m := startSDKManager(t, b.dsn(t))
			ctx := scenarioContext(t, 8*time.Minute)
			var started struct{ Runs map[string]string }
			driver(t, ctx, &started, "drive_conditions.py", "start", sdkEndpoint(m))
			approve := started.Runs["approve"]
			const paused = common.ActionPhase_ACTION_PHASE_PAUSED
			want := map[string]common.ActionPhase{"approve": paused, "count": paused}
			before := waitConditions(t, ctx, m, approve, want)
			m.Kill()
			m.Restart()
			after := waitConditions(t, ctx, m, approve, want)
			for name, a := range before {
				if after[name].GetId().GetName() != a.GetId().GetName() {
					t.Errorf("condition %s is action %s after the restart, %s before", name, after[name].GetId().GetName(), a.GetId().GetName())
				}
			}
			for _, s := range [][2]string{{"approve", "true"}, {"count", "41"}} {
				var sent struct{ Error string }
				driver(t, ctx, &sent, "drive_conditions.py", "signal", sdkEndpoint(m), approve, s[0], s[1])
				if sent.Error != "" {
					t.Fatalf("signal %s after the restart: %s", s[0], sent.Error)
				}
			}
			var res struct {
				Phase, Error string
				Output       any
			}
			driver(t, ctx, &res, "drive_conditions.py", "outcome", sdkEndpoint(m), approve)
			if res.Phase != "SUCCEEDED" || res.Output != "True:42" {
				t.Errorf("run %s signalled after a restart: %s %v %s, want SUCCEEDED with \"True:42\"", approve, res.Phase, res.Output, res.Error)
			}
		})
	}
}

package trigger

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/store"
)

// ListTriggers and GetTriggerDetails say when each trigger fires next
// (NextFiringHeader): an active fixed rate one interval after it was
// activated, then after its last firing; nothing for a trigger run by
// name only or switched off.
func TestNextFiringHeader(t *testing.T) {
	ctx := context.Background()
	st := store.New(dbtest.Migrated(t, dbtest.SQLiteDSN(t)))
	deployTask(t, st)
	svc := NewService(st, time.Minute, slog.New(slog.DiscardHandler))
	nameOf := func(n string) *common.TriggerName {
		return &common.TriggerName{Project: "p", Domain: "development", TaskName: "env.report", Name: n}
	}
	rate := &task.TriggerAutomationSpec{Type: task.TriggerAutomationSpecType_TYPE_SCHEDULE,
		Automation: &task.TriggerAutomationSpec_Schedule{Schedule: &task.Schedule{Expression: &task.Schedule_Rate{
			Rate: &task.FixedRate{Value: 5, Unit: task.FixedRateUnit_FIXED_RATE_UNIT_MINUTE}}}}}
	for _, d := range []*trigger.DeployTriggerRequest{
		{Name: nameOf("every5"), Spec: &trigger.TriggerSpec{Active: true, TaskVersion: "v1"}, AutomationSpec: rate},
		{Name: nameOf("manual"), Spec: &trigger.TriggerSpec{Active: true, TaskVersion: "v1"},
			AutomationSpec: &task.TriggerAutomationSpec{Type: task.TriggerAutomationSpecType_TYPE_NONE}},
	} {
		if _, err := svc.DeployTrigger(ctx, connect.NewRequest(d)); err != nil {
			t.Fatal(err)
		}
	}
	row, err := st.Triggers.Get(ctx, store.TriggerKey{Project: "p", Domain: "development", TaskName: "env.report", Name: "every5"})
	if err != nil {
		t.Fatal(err)
	}
	want := row.ActiveSince.Add(5 * time.Minute).UTC()

	list := func() map[string]string {
		t.Helper()
		resp, err := svc.ListTriggers(ctx, connect.NewRequest(&trigger.ListTriggersRequest{
			ScopeBy: &trigger.ListTriggersRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Domain: "development", Name: "p"}}}))
		if err != nil {
			t.Fatal(err)
		}
		times := strings.Split(resp.Header().Get(NextFiringHeader), ",")
		if len(times) != len(resp.Msg.GetTriggers()) {
			t.Fatalf("%s %q for %d triggers", NextFiringHeader, resp.Header().Get(NextFiringHeader), len(resp.Msg.GetTriggers()))
		}
		out := map[string]string{}
		for i, tr := range resp.Msg.GetTriggers() {
			out[tr.GetId().GetName().GetName()] = times[i]
		}
		return out
	}
	got := list()
	if next, err := time.Parse(time.RFC3339Nano, got["every5"]); err != nil || !next.Equal(want) {
		t.Errorf("every5 fires next at %q, want %s", got["every5"], want)
	}
	if got["manual"] != "-" {
		t.Errorf("a trigger run by name only fires next at %q, want -", got["manual"])
	}

	details, err := svc.GetTriggerDetails(ctx, connect.NewRequest(&trigger.GetTriggerDetailsRequest{Name: nameOf("every5")}))
	if err != nil {
		t.Fatal(err)
	}
	if h := details.Header().Get(NextFiringHeader); h != want.Format(time.RFC3339Nano) {
		t.Errorf("GetTriggerDetails: %s %q, want %s", NextFiringHeader, h, want)
	}

	if _, err := svc.UpdateTriggers(ctx, connect.NewRequest(&trigger.UpdateTriggersRequest{Names: []*common.TriggerName{nameOf("every5")}, Active: false})); err != nil {
		t.Fatal(err)
	}
	if got := list(); got["every5"] != "-" {
		t.Errorf("a deactivated trigger fires next at %q, want -", got["every5"])
	}
}

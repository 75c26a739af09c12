package trigger

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"gorm.io/gorm"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/trigger"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/schedule"
	"fmgr.dev/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// runs is a RunCreator that keeps what it was asked, by run name, and
// answers AlreadyExists for a name it has, as the run state does.
type runs struct {
	mu   sync.Mutex
	made map[string]*workflow.CreateRunRequest
	fail error
}

func (r *runs) CreateRun(_ context.Context, req *workflow.CreateRunRequest) (*workflow.Run, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	name := req.GetRunId().GetName()
	if _, ok := r.made[name]; ok {
		return nil, fmt.Errorf("run %s: %w", name, errs.ErrAlreadyExists)
	}
	r.made[name] = req
	return &workflow.Run{}, nil
}

// slots are the scheduled times of the runs made, in order.
func (r *runs) slots() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Time
	for _, req := range r.made {
		out = append(out, req.GetRunStartTime().AsTime())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func wantSlots(t *testing.T, r *runs, want ...string) {
	t.Helper()
	got := r.slots()
	if len(got) != len(want) {
		t.Fatalf("runs made for %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(at(want[i])) {
			t.Fatalf("runs made for %v, want %v", got, want)
		}
	}
}

// A Cron trigger in a time zone, driven by an injected clock through a DST
// change, a manager restart and a gap, then deactivated.
func TestSchedulerCronWithClock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) {
		ctx := context.Background()
		st := store.New(g)
		deployTask(t, st)
		svc := NewService(st, time.Minute, nil)
		name := &common.TriggerName{Project: "p", Domain: "development", TaskName: "env.report", Name: "morning"}
		automation := &task.TriggerAutomationSpec{
			Type: task.TriggerAutomationSpecType_TYPE_SCHEDULE,
			Automation: &task.TriggerAutomationSpec_Schedule{Schedule: &task.Schedule{
				Expression:          &task.Schedule_Cron{Cron: &task.Cron{Expression: "0 9 * * *", Timezone: "America/New_York"}},
				KickoffTimeInputArg: "day",
			}},
		}
		if _, err := svc.DeployTrigger(ctx, connect.NewRequest(&trigger.DeployTriggerRequest{
			Name: name, Spec: &trigger.TriggerSpec{Active: true, TaskVersion: "v1"}, AutomationSpec: automation,
		})); err != nil {
			t.Fatal(err)
		}
		// The trigger was deployed at the anchor, by the injected clock:
		// Friday 12 March 2027, three days before US DST begins (Sunday
		// 14 March). 09:00 EST is 14:00 UTC, 09:00 EDT 13:00 UTC.
		if err := g.Exec("UPDATE triggers SET active_since = ?", at("2027-03-12T12:00:00Z")).Error; err != nil {
			t.Fatal(err)
		}
		made := &runs{made: map[string]*workflow.CreateRunRequest{}}
		c := &clock{}
		sched := NewScheduler(st, made, nil, c.now, SchedulerConfig{CatchUp: schedule.All, MaxCatchUp: 100}, nil)
		pass := func(now string) {
			t.Helper()
			c.t = at(now)
			if err := sched.Pass(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pass("2027-03-12T12:00:00Z") // the deploy fires nothing
		wantSlots(t, made)
		pass("2027-03-12T14:00:30Z")
		wantSlots(t, made, "2027-03-12T14:00:00Z")
		pass("2027-03-12T20:00:00Z") // nothing new
		wantSlots(t, made, "2027-03-12T14:00:00Z")
		pass("2027-03-13T14:00:01Z")
		pass("2027-03-14T13:00:01Z")
		wantSlots(t, made, "2027-03-12T14:00:00Z", "2027-03-13T14:00:00Z", "2027-03-14T13:00:00Z")
		for name, req := range made.made {
			if req.GetSource() != workflow.RunSource_RUN_SOURCE_SCHEDULE_TRIGGER || req.GetTriggerName().GetName() != "morning" ||
				name != RunName(store.TriggerKey{Project: "p", Domain: "development", TaskName: "env.report", Name: "morning"}, req.GetRunStartTime().AsTime()) {
				t.Fatalf("firing %s: %v", name, req)
			}
		}

		// A restart: a new scheduler over the same database makes nothing
		// again.
		sched = NewScheduler(st, made, nil, c.now, SchedulerConfig{CatchUp: schedule.All, MaxCatchUp: 100}, nil)
		pass("2027-03-14T13:30:00Z")
		if n := len(made.slots()); n != 3 {
			t.Fatalf("a restarted scheduler fired again: %v", made.slots())
		}
		// A firing whose run was made but not recorded (a crash between
		// the two) is found there and recorded, not made twice.
		lost := at("2027-03-15T00:00:00Z")
		k := store.TriggerKey{Project: "p", Domain: "development", TaskName: "env.report", Name: "morning"}
		made.made[RunName(k, at(lost.Format("2006-01-02")+"T13:00:00Z"))] = &workflow.CreateRunRequest{}
		pass(lost.Format("2006-01-02") + "T13:00:05Z")
		row, err := st.Triggers.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if row.LastSlot == nil || !row.LastSlot.Equal(at(lost.Format("2006-01-02")+"T13:00:00Z")) {
			t.Fatalf("last slot %v after a firing found made", row.LastSlot)
		}
		// Three days down: each missed morning once, oldest first.
		pass(lost.AddDate(0, 0, 3).Format("2006-01-02") + "T13:00:05Z")
		if n := len(made.made); n != 7 {
			t.Fatalf("after a gap of three days %d runs, want 6: %v", n, made.slots())
		}
		// A failure that may pass is retried; nothing is skipped.
		made.fail = fmt.Errorf("database down: %w", errs.ErrUnavailable)
		pass(lost.AddDate(0, 0, 4).Format("2006-01-02") + "T13:00:05Z")
		made.fail = nil
		pass(lost.AddDate(0, 0, 4).Format("2006-01-02") + "T13:01:05Z")
		if n := len(made.made); n != 8 {
			t.Fatalf("after a failed firing was retried %d runs, want 8", n)
		}
		// Deactivated: nothing more, however long.
		if _, err := svc.UpdateTriggers(ctx, connect.NewRequest(&trigger.UpdateTriggersRequest{Names: []*common.TriggerName{name}})); err != nil {
			t.Fatal(err)
		}
		pass(lost.AddDate(0, 0, 10).Format("2006-01-02") + "T13:00:05Z")
		if n := len(made.made); n != 8 {
			t.Fatalf("a deactivated trigger fired: %d runs", n)
		}
	})
}

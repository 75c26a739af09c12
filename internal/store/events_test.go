package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The executor's writes record their details on the transition they make,
// and reports within a phase as its next versions, in order.
func TestUpdateRecordsEventDetails(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		key := run1.Action(store.RootName)
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		t0 := time.Now().Add(time.Hour).Truncate(time.Second) // after the creation
		a = must[*store.Action](t)(s.Actions.Update(ctx, key, a.ResourceVersion, store.Update{Phase: phase.Running, At: t0,
			Events: []store.Event{{Attempt: 1, Phase: phase.Running, Reason: "started", Info: []byte("running")}}}))
		// A report in the same phase: a new version, no transition.
		a = must[*store.Action](t)(s.Actions.Update(ctx, key, a.ResourceVersion, store.Update{
			Events: []store.Event{{Attempt: 1, Phase: phase.Running, OccurredAt: t0.Add(time.Second), Reason: "Pulled", Info: []byte("pulled")}}}))
		must[*store.Action](t)(s.Actions.Update(ctx, key, a.ResourceVersion, store.Update{Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true,
			At: t0.Add(2 * time.Second), Events: []store.Event{
				{Attempt: 1, Phase: phase.Failed, Reason: "exit 1"},
				{Attempt: 2, Phase: phase.Queued, Reason: "retrying after exit 1"},
			}}))
		type row struct {
			attempt int32
			phase   phase.Phase
			version int32
			reason  string
			info    string
		}
		want := []row{
			{1, phase.Queued, 0, "", ""},
			{1, phase.Running, 0, "started", "running"},
			{1, phase.Running, 1, "Pulled", "pulled"},
			{1, phase.Failed, 0, "exit 1", ""},
			{2, phase.Queued, 0, "retrying after exit 1", ""},
		}
		evs := must[[]store.Event](t)(s.Actions.Events(ctx, key))
		if len(evs) != len(want) {
			t.Fatalf("events = %+v", evs)
		}
		for i, e := range evs {
			if got := (row{e.Attempt, e.Phase, e.Version, e.Reason, string(e.Info)}); got != want[i] {
				t.Fatalf("event %d = %+v, want %+v", i, got, want[i])
			}
		}
		if !evs[1].OccurredAt.Equal(t0) || !evs[2].OccurredAt.Equal(t0.Add(time.Second)) || !evs[3].OccurredAt.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("times = %v %v %v", evs[1].OccurredAt, evs[2].OccurredAt, evs[3].OccurredAt)
		}
	})
}

// reportLimits are far from every test's events here (the events service's
// tests try them).
var reportLimits = store.ReportLimits{MaxPerAttempt: 100, MaxAttemptBytes: 1 << 20}

// The events service's path: the same event twice is recorded once, and a
// recorded event wakes watchers (one change_log row) without changing the
// action row.
func TestRecordEventsIdempotent(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		key := run1.Action(store.RootName)
		a := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(run1)))
		ev := store.Event{Attempt: 1, Phase: phase.Queued, Version: 3, Reason: "Scheduled", Info: []byte("x")}
		changes := count(t, g, "SELECT COUNT(*) FROM change_log")
		if n := must[int](t)(s.Actions.RecordEvents(ctx, key, []store.Event{ev, ev}, reportLimits)); n != 1 {
			t.Fatalf("first record: %d new, want 1", n)
		}
		if n := must[int](t)(s.Actions.RecordEvents(ctx, key, []store.Event{ev}, reportLimits)); n != 0 {
			t.Fatalf("second record: %d new, want 0", n)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM action_events WHERE action_id = ? AND version = 3", a.ID); n != 1 {
			t.Fatalf("%d rows for the event, want 1", n)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM change_log WHERE kind = ?", store.KindEvent); n != 1 || count(t, g, "SELECT COUNT(*) FROM change_log") != changes+1 {
			t.Fatalf("change_log: %d event rows, want 1", n)
		}
		after := must[*store.Action](t)(s.Actions.Get(ctx, key))
		if after.ResourceVersion != a.ResourceVersion || after.Phase != phase.Queued {
			t.Fatalf("the action row changed: %+v", after)
		}

		// Bad input changes nothing, even next to a good event.
		good := store.Event{Attempt: 1, Phase: phase.Queued, Version: 4}
		for _, tc := range []struct {
			name string
			key  store.ActionKey
			evs  []store.Event
			want error
		}{
			{"unknown action", run1.Action("nope"), []store.Event{good}, errs.ErrNotFound},
			{"unknown attempt", key, []store.Event{good, {Attempt: 2, Phase: phase.Queued}}, errs.ErrNotFound},
			{"attempt zero", key, []store.Event{good, {Attempt: 0, Phase: phase.Queued}}, errs.ErrNotFound},
			{"no phase", key, []store.Event{good, {Attempt: 1}}, errs.ErrInvalid},
			{"no version", key, []store.Event{good, {Attempt: 1, Phase: phase.Queued, Version: store.NextVersion}}, errs.ErrInvalid},
		} {
			_, err := s.Actions.RecordEvents(ctx, tc.key, tc.evs, reportLimits)
			wantErr(t, err, tc.want)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM action_events WHERE action_id = ?", a.ID); n != 2 { // QUEUED and Scheduled
			t.Fatalf("%d events after bad input, want 2", n)
		}
	})
}

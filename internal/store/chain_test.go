package store_test

import (
	"context"
	"slices"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// A write's statements after its read go as one on PostgreSQL (chain.go),
// whose parts see one snapshot: reports of one phase that number each
// other's versions must still get versions of their own, and a retry's
// closing of one attempt and opening of the next must both land.
func TestChainedWriteRecordsEverything(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		run := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(runKey("chain"))))
		a := must[*store.Action](t)(s.Actions.Update(ctx, run.ActionKey, run.ResourceVersion, store.Update{
			Phase: phase.Running,
			Events: []store.Event{
				{Attempt: 1, Phase: phase.Running, Reason: "entered"},
				{Attempt: 1, Phase: phase.Running, Reason: "report 1"},
				{Attempt: 1, Phase: phase.Running, Reason: "report 2"},
				{Attempt: 1, Phase: phase.Queued, Reason: "late queued report"},
			},
		}))
		a = must[*store.Action](t)(s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion, store.Update{
			Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true, ErrorInfo: []byte("boom"),
		}))
		if a.Attempts != 2 || a.Phase != phase.Queued {
			t.Fatalf("after the retry: attempt %d in %v", a.Attempts, a.Phase)
		}
		atts := must[[]store.Attempt](t)(s.Actions.Attempts(ctx, a.ActionKey))
		if len(atts) != 2 || atts[0].Phase != phase.Failed || atts[0].EndedAt == nil || string(atts[0].ErrorInfo) != "boom" || atts[1].Phase != phase.Queued {
			t.Fatalf("attempts %+v: want attempt 1 FAILED and ended, attempt 2 QUEUED", atts)
		}
		var got []string
		for _, e := range must[[]store.Event](t)(s.Actions.Events(ctx, a.ActionKey)) {
			got = append(got, e.Phase.String()+"/"+e.Reason+"/"+string(rune('0'+e.Version)))
		}
		want := []string{
			"QUEUED//0", "RUNNING/entered/0", "RUNNING/report 1/1", "RUNNING/report 2/2", "QUEUED/late queued report/1",
			"FAILED//0", "QUEUED//0",
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("events %v, want %v", got, want)
		}
		if n := count(t, g, "SELECT COUNT(*) FROM change_log WHERE name = ? AND run_name = ?", a.Name, a.RunName); n != 3 {
			t.Errorf("%d changes of the action, want 3", n)
		}
	})
}

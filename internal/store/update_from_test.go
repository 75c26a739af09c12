package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// UpdateFrom writes what Update writes, starting from the caller's row:
// the attempts, the events and the change log come out the same, through a
// claim, a retry and an end.
func TestUpdateFromWritesWhatUpdateWrites(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 2)
		steps := []store.Update{
			{Phase: phase.Initializing, Owner: 7, Cluster: "local"},
			{Phase: phase.Running, LogInfo: []byte("log")},
			{Phase: phase.Queued, AttemptPhase: phase.Failed, Retry: true, ErrorInfo: []byte("boom"), OutputURI: "out/1"},
			{Phase: phase.Initializing},
			{Phase: phase.Succeeded, OutputURI: "out/2", Events: []store.Event{{Attempt: 2, Phase: phase.Succeeded, Reason: "done"}}},
		}
		byUpdate, byFrom := runs[0], runs[1]
		for _, u := range steps {
			byUpdate = must[*store.Action](t)(s.Actions.Update(ctx, byUpdate.ActionKey, byUpdate.ResourceVersion, u))
			held := *byFrom
			byFrom = must[*store.Action](t)(s.Actions.UpdateFrom(ctx, byFrom, u))
			if held.ResourceVersion == byFrom.ResourceVersion || held.Phase == byFrom.Phase {
				t.Fatalf("UpdateFrom returned the row it was given: %+v", byFrom)
			}
			stored := must[*store.Action](t)(s.Actions.Get(ctx, byFrom.ActionKey))
			if stored.ResourceVersion != byFrom.ResourceVersion || stored.Phase != byFrom.Phase || stored.Attempts != byFrom.Attempts ||
				(stored.StartedAt == nil) != (byFrom.StartedAt == nil) || (stored.EndedAt == nil) != (byFrom.EndedAt == nil) {
				t.Fatalf("UpdateFrom returned %+v, the store holds %+v", byFrom, stored)
			}
		}
		if byUpdate.Phase != byFrom.Phase || byUpdate.Attempts != byFrom.Attempts {
			t.Fatalf("Update ended in %v attempt %d, UpdateFrom in %v attempt %d", byUpdate.Phase, byUpdate.Attempts, byFrom.Phase, byFrom.Attempts)
		}
		attempts := func(a *store.Action) (out []string) {
			for _, at := range must[[]store.Attempt](t)(s.Actions.Attempts(ctx, a.ActionKey)) {
				out = append(out, at.Phase.String()+" "+at.OutputURI+" "+string(at.ErrorInfo)+" "+string(at.LogInfo)+" "+at.Cluster+" "+
					map[bool]string{true: "ended", false: "open"}[at.EndedAt != nil])
			}
			return out
		}
		events := func(a *store.Action) (out []string) {
			for _, e := range must[[]store.Event](t)(s.Actions.Events(ctx, a.ActionKey)) {
				out = append(out, e.Phase.String()+"/"+e.Reason+"/"+string(rune('0'+e.Attempt))+string(rune('0'+e.Version)))
			}
			return out
		}
		for what, pair := range map[string][2][]string{
			"attempts": {attempts(byUpdate), attempts(byFrom)},
			"events":   {events(byUpdate), events(byFrom)},
		} {
			if len(pair[0]) == 0 || !slices.Equal(pair[0], pair[1]) {
				t.Errorf("%s: Update wrote %q, UpdateFrom %q", what, pair[0], pair[1])
			}
		}
		changes := "SELECT COUNT(*) FROM change_log WHERE run_name = ? AND name = ?"
		if a, b := count(t, g, changes, byUpdate.RunName, byUpdate.Name), count(t, g, changes, byFrom.RunName, byFrom.Name); a != b {
			t.Errorf("change_log: %d rows for Update, %d for UpdateFrom", a, b)
		}
	})
}

// A row that moved since the caller read it refuses the write, and nothing
// of it is written: no attempt change, no event, no change_log row, no
// resource version taken. Alone and in a batch with other writers.
func TestUpdateFromStaleRowWritesNothing(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 4)
		held := runs[0]
		moved := must[*store.Action](t)(s.Actions.Update(ctx, held.ActionKey, held.ResourceVersion, store.Update{AbortRequested: true}))
		events := "SELECT COUNT(*) FROM action_events WHERE action_id = ?"
		changes := "SELECT COUNT(*) FROM change_log"
		version := "SELECT value FROM resource_version WHERE id = 1"
		check := func(t *testing.T, err error, evBefore, chBefore, rvBefore int64) {
			t.Helper()
			wantErr(t, err, errs.ErrConflict)
			if n := count(t, g, events, held.ID); n != evBefore {
				t.Errorf("%d events after a refused write, want %d", n, evBefore)
			}
			if n := count(t, g, changes); n != chBefore {
				t.Errorf("%d change_log rows after a refused write, want %d", n, chBefore)
			}
			if n := count(t, g, version); n != rvBefore {
				t.Errorf("resource version %d after a refused write, want %d", n, rvBefore)
			}
			at := must[[]store.Attempt](t)(s.Actions.Attempts(ctx, held.ActionKey))
			if len(at) != 1 || at[0].Phase != phase.Queued || at[0].OutputURI != "" {
				t.Errorf("attempts after a refused write: %+v", at)
			}
			now := must[*store.Action](t)(s.Actions.Get(ctx, held.ActionKey))
			if now.ResourceVersion != moved.ResourceVersion || now.Phase != phase.Queued {
				t.Errorf("the row after a refused write: version %d phase %v, want %d QUEUED", now.ResourceVersion, now.Phase, moved.ResourceVersion)
			}
		}
		stale := store.Update{Phase: phase.Succeeded, OutputURI: "out", Events: []store.Event{{Attempt: 1, Phase: phase.Queued, Reason: "late"}}}

		ev, ch, rv := count(t, g, events, held.ID), count(t, g, changes), count(t, g, version)
		_, err := s.Actions.UpdateFrom(ctx, held, stale)
		check(t, err, ev, ch, rv)

		// In a batch: the others commit, the stale one alone is refused.
		release := holdCommitter(t, s)
		staleErr := async(func() error { _, err := s.Actions.UpdateFrom(ctx, held, stale); return err })
		var others []<-chan error
		for _, a := range runs[1:] {
			others = append(others, async(func() error {
				_, err := s.Actions.UpdateFrom(ctx, a, store.Update{Phase: phase.Running, At: time.Now()})
				return err
			}))
		}
		waitQueued(t, s, 1+len(others))
		ev, ch, rv = count(t, g, events, held.ID), count(t, g, changes), count(t, g, version)
		release()
		err = <-staleErr
		for _, c := range others {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		check(t, err, ev, ch+int64(len(others)), rv+int64(len(others)))
	})
}

// UpdateFrom sends one statement fewer than Update: the row's read.
func TestUpdateFromSkipsTheRead(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 2)
		n := countStatements(t, g)
		before := n.Load()
		must[*store.Action](t)(s.Actions.Update(ctx, runs[0].ActionKey, runs[0].ResourceVersion, store.Update{Phase: phase.Initializing}))
		byUpdate := n.Load() - before
		before = n.Load()
		must[*store.Action](t)(s.Actions.UpdateFrom(ctx, runs[1], store.Update{Phase: phase.Initializing}))
		byFrom := n.Load() - before
		if byFrom != byUpdate-1 {
			t.Errorf("UpdateFrom ran %d statements, Update %d: want one fewer", byFrom, byUpdate)
		}
	})
}

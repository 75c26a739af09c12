package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

func newTrigger(name string, active bool, typ string, spec string) store.Trigger {
	return store.Trigger{
		TriggerKey:     store.TriggerKey{Project: "p", Domain: "development", TaskName: "env.t", Name: name},
		TaskVersion:    "v1",
		Active:         active,
		AutomationType: typ,
		Spec:           []byte(spec),
		AutomationSpec: []byte("auto-" + spec),
	}
}

func TestTriggersDeployRevisions(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		tr := s.Triggers
		a := must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "1"), 0))
		if a.Revision != 1 || !a.Active {
			t.Fatalf("first deploy: revision %d active %v", a.Revision, a.Active)
		}
		// The same content again is a no-op.
		again := must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "1"), 0))
		if again.Revision != 1 || !again.ActiveSince.Equal(a.ActiveSince) {
			t.Fatalf("unchanged deploy moved the trigger: revision %d", again.Revision)
		}
		// A new spec bumps the revision; a stale revision is refused.
		b := must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "2"), 1))
		if b.Revision != 2 {
			t.Fatalf("revision %d, want 2", b.Revision)
		}
		_, err := tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "3"), 1)
		wantErr(t, err, errs.ErrPrecondition)
		// Deactivate, then delete; a deleted trigger is gone for Get and
		// List, and a redeploy brings it back at the next revision.
		k := a.TriggerKey
		if err := tr.SetActive(ctx, []store.TriggerKey{k}, false, ""); err != nil {
			t.Fatal(err)
		}
		got := must[*store.Trigger](t)(tr.Get(ctx, k))
		if got.Active || got.Revision != 3 {
			t.Fatalf("after deactivate: active %v revision %d", got.Active, got.Revision)
		}
		if n := len(must[[]store.Trigger](t)(tr.Scheduled(ctx))); n != 0 {
			t.Fatalf("a deactivated trigger is scheduled (%d)", n)
		}
		missing := k
		missing.Name = "nope"
		wantErr(t, tr.SetActive(ctx, []store.TriggerKey{k, missing}, true, ""), errs.ErrNotFound)
		if got := must[*store.Trigger](t)(tr.Get(ctx, k)); got.Active {
			t.Fatal("a refused update changed a trigger")
		}
		if err := tr.Delete(ctx, []store.TriggerKey{k}, ""); err != nil {
			t.Fatal(err)
		}
		_, err = tr.Get(ctx, k)
		wantErr(t, err, errs.ErrNotFound)
		back := must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "2"), 0))
		if back.Revision != 5 || back.DeletedAt != nil || !back.Active {
			t.Fatalf("redeploy after delete: %+v", back)
		}
	})
}

func TestTriggersReplaceForTaskAndList(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		tr := s.Triggers
		must[[]store.Trigger](t)(tr.ReplaceForTask(ctx, []store.Trigger{
			newTrigger("hourly", true, store.TriggerTypeSchedule, "h"),
			newTrigger("manual", false, store.TriggerTypeNone, "m"),
		}))
		// Deploying the task again with one trigger deletes the other.
		must[[]store.Trigger](t)(tr.ReplaceForTask(ctx, []store.Trigger{newTrigger("manual", true, store.TriggerTypeNone, "m")}))
		all := list(t, tr, store.TriggerFilter{Project: "p", Domain: "development"})
		if len(all) != 1 || all[0].TriggerKey.Name != "manual" || !all[0].Active {
			t.Fatalf("after replace: %+v", all)
		}
		// An empty list prunes nothing.
		must[[]store.Trigger](t)(tr.ReplaceForTask(ctx, nil))
		must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("Nightly", false, store.TriggerTypeSchedule, "n"), 0))
		must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("weekly", true, store.TriggerTypeSchedule, "w"), 0))
		// Active first, then newest.
		rows, token := func() ([]store.Trigger, string) {
			rows, token, err := tr.List(ctx, store.TriggerFilter{Project: "p", Domain: "development"}, store.Page{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			return rows, token
		}()
		if len(rows) != 2 || rows[0].TriggerKey.Name != "weekly" || rows[1].TriggerKey.Name != "manual" || token == "" {
			t.Fatalf("page 1: %v %q", triggerNames(rows), token)
		}
		rest, next, err := tr.List(ctx, store.TriggerFilter{Project: "p", Domain: "development"}, store.Page{Limit: 2, Token: token})
		if err != nil || len(rest) != 1 || rest[0].TriggerKey.Name != "Nightly" || next != "" {
			t.Fatalf("page 2: %v %q %v", triggerNames(rest), next, err)
		}
		inactive := false
		rows = list(t, tr, store.TriggerFilter{Project: "p", Domain: "development", Active: &inactive,
			NameContains: []store.Substring{{Text: "night", IgnoreCase: true}}, AutomationTypes: []string{store.TriggerTypeSchedule}})
		if len(rows) != 1 || rows[0].TriggerKey.Name != "Nightly" {
			t.Fatalf("filtered: %v", triggerNames(rows))
		}
	})
}

func TestTriggersRecordRun(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		tr := s.Triggers
		a := must[*store.Trigger](t)(tr.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "1"), 0))
		slot := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		run := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}
		for range 2 { // a retried firing records once
			if err := tr.RecordRun(ctx, a, run, &slot); err != nil {
				t.Fatal(err)
			}
		}
		earlier := slot.Add(-time.Minute)
		if err := tr.RecordRun(ctx, a, store.RunKey{Project: "p", Domain: "development", RunName: "r0"}, &earlier); err != nil {
			t.Fatal(err)
		}
		got := must[*store.Trigger](t)(tr.Get(ctx, a.TriggerKey))
		if got.LastSlot == nil || !got.LastSlot.Equal(slot) {
			t.Fatalf("last slot %v, want %s (never back)", got.LastSlot, slot)
		}
		runs := must[[]store.TriggerRun](t)(tr.RunsOf(ctx, a.ID, 10))
		if len(runs) != 2 {
			t.Fatalf("runs of the trigger: %+v", runs)
		}
	})
}

func triggerNames(ts []store.Trigger) []string {
	out := make([]string, len(ts))
	for i := range ts {
		out[i] = ts[i].TriggerKey.Name
	}
	return out
}

func list(t *testing.T, tr *store.Triggers, f store.TriggerFilter) []store.Trigger {
	t.Helper()
	rows, _, err := tr.List(context.Background(), f, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestTasksByTriggerType(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		for _, name := range []string{"env.t", "env.u"} {
			if _, _, err := s.Tasks.Deploy(ctx, store.Task{
				TaskID:     store.TaskID{Project: "p", Domain: "development", Name: name, Version: "v1"},
				SpecDigest: store.SpecDigest([]byte(name)),
			}, []byte(name)); err != nil {
				t.Fatal(err)
			}
		}
		tr := must[*store.Trigger](t)(s.Triggers.Deploy(ctx, newTrigger("a", true, store.TriggerTypeSchedule, "1"), 0))
		listed := func(types ...string) []string {
			rows, _, err := s.Tasks.List(ctx, store.TaskFilter{Project: "p", Domain: "development", TriggerTypes: types}, store.Page{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.TaskID.Name)
			}
			return out
		}
		if got := listed(store.TriggerTypeSchedule); len(got) != 1 || got[0] != "env.t" {
			t.Errorf("scheduled: %v, want env.t", got)
		}
		if got := listed(store.TriggerTypeNone); len(got) != 1 || got[0] != "env.u" {
			t.Errorf("none: %v, want env.u", got)
		}
		if err := s.Triggers.Delete(ctx, []store.TriggerKey{tr.TriggerKey}, ""); err != nil {
			t.Fatal(err)
		}
		if got := listed(store.TriggerTypeNone); len(got) != 2 {
			t.Errorf("none after the trigger was deleted: %v, want both", got)
		}
		if got := listed("TYPE_ARTIFACT"); len(got) != 0 {
			t.Errorf("artifact: %v, want none", got)
		}
	})
}

package store_test

import (
	"context"
	"reflect"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The hot reads scan actions with an explicit column list (action_scan.go):
// they must read every column exactly as gorm's model read does, NULLs
// included, and the change feed must do so through its LEFT JOIN.
func TestActionScanMatchesTheModel(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		run := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(runKey("scan"))))
		kid, _, err := s.Actions.CreateChild(ctx, child(run.RunKey, "c1", store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		now := db.Now()
		// Every column a value of its own, so that one the scan skips or
		// swaps shows.
		if err := g.Exec(`UPDATE actions SET error_info = ?, abort_info = ?, abort_requested_at = ?, started_at = ?, ended_at = ?,
			cache_status = 3, cache_key = 'ck', queue = 'q1', recovered_from = 'r0', short_name = 'sn', environment_name = 'env',
			created_by = 'bob', task_type = 'python', run_output_base = 'rob', phase = ?, run_spec = ?, task_org = 'to',
			condition_spec = ?, signal_info = ? WHERE id = ?`,
			[]byte("err"), []byte("abort"), now, now, now, phase.Succeeded, []byte("rs"), []byte("cond"), []byte("sig"), kid.ID).Error; err != nil {
			t.Fatal(err)
		}
		var model store.Action
		if err := g.Where("id = ?", kid.ID).Take(&model).Error; err != nil {
			t.Fatal(err)
		}
		v := reflect.ValueOf(model)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Fatalf("field %s is zero in this test: give it a value above", v.Type().Field(i).Name)
			}
		}
		got := must[*store.Action](t)(s.Actions.Get(ctx, kid.ActionKey))
		if !reflect.DeepEqual(*got, model) {
			t.Errorf("Get read\n%+v\nthe model reads\n%+v", *got, model)
		}
		var root store.Action // NULL parent, spec digest as written, no times set
		if err := g.Where("id = ?", run.ID).Take(&root).Error; err != nil {
			t.Fatal(err)
		}
		if got := must[*store.Action](t)(s.Actions.Get(ctx, run.ActionKey)); !reflect.DeepEqual(*got, root) {
			t.Errorf("Get read the root as\n%+v\nthe model reads\n%+v", *got, root)
		}

		feed := must[[]store.Change](t)(s.Actions.ChangeFeed(ctx, 0, 100))
		var changes []store.Change
		if err := g.Order("resource_version").Find(&changes).Error; err != nil {
			t.Fatal(err)
		}
		if len(feed) != len(changes) || len(feed) < 2 {
			t.Fatalf("the feed has %d changes, the change log %d", len(feed), len(changes))
		}
		for i, c := range feed {
			want := map[int64]store.Action{kid.ID: model, run.ID: root}[c.Action.ID]
			if c.Action == nil || !reflect.DeepEqual(*c.Action, want) {
				t.Errorf("change %d carries %+v, want %+v", c.ResourceVersion, c.Action, want)
			}
			c.Action = nil
			if !reflect.DeepEqual(c, changes[i]) {
				t.Errorf("feed change %+v, the change log has %+v", c, changes[i])
			}
		}
		if err := g.Exec("DELETE FROM actions WHERE id = ?", kid.ID).Error; err != nil {
			t.Fatal(err)
		}
		for _, c := range must[[]store.Change](t)(s.Actions.ChangeFeed(ctx, 0, 100)) {
			if c.Key == kid.ActionKey && c.Action != nil {
				t.Errorf("change %d of a deleted action carries a row: %+v", c.ResourceVersion, c.Action)
			}
		}
	})
}

// GetWithParent reads an action as Get does, with its parent's phase and
// abort mark; a root has no parent.
func TestGetWithParent(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		run := must[*store.Action](t)(s.Actions.CreateRun(ctx, newRun(runKey("gwp"))))
		kid, _, err := s.Actions.CreateChild(ctx, child(run.RunKey, "c1", store.RootName))
		if err != nil {
			t.Fatal(err)
		}
		a, p, err := s.Actions.GetWithParent(ctx, run.ActionKey)
		if err != nil || p != nil || !reflect.DeepEqual(a, must[*store.Action](t)(s.Actions.Get(ctx, run.ActionKey))) {
			t.Fatalf("root: %+v, parent %+v, %v; want Get's row and no parent", a, p, err)
		}
		if _, err := s.Actions.RequestAbort(ctx, run.ActionKey, []byte("why")); err != nil {
			t.Fatal(err)
		}
		a, p, err = s.Actions.GetWithParent(ctx, kid.ActionKey)
		if err != nil || !reflect.DeepEqual(a, must[*store.Action](t)(s.Actions.Get(ctx, kid.ActionKey))) {
			t.Fatalf("child: %+v, %v; want Get's row", a, err)
		}
		if p == nil || p.Name != store.RootName || p.Phase != phase.Queued || p.AbortRequestedAt == nil {
			t.Errorf("parent %+v: want a0, QUEUED, marked for abort", p)
		}
		_, _, err = s.Actions.GetWithParent(ctx, run.RunKey.Action("nope"))
		wantErr(t, err, errs.ErrNotFound)
	})
}

package runstate_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// TestCreateRunRelation: a rerun or recovery names a run of the same
// project and domain that exists (a recovery: one that has ended); a bad
// relation is refused with a message naming the field and creates nothing.
// A good one is stored and shown on the new run's root.
func TestCreateRunRelation(t *testing.T) {
	suite(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		createRun(t, e, "src")
		rel := func(kind common.RelationType, to *common.RunIdentifier, forced ...string) *task.RunSpec {
			rs := &task.RunSpec{Relation: &common.Relation{RelatedTo: to, RelationType: kind}}
			if len(forced) > 0 {
				rs.Recover = &task.Recover{ForceRerunActions: forced}
			}
			return rs
		}
		create := func(name string, rs *task.RunSpec) error {
			_, err := e.state.CreateRun(ctx, &workflow.CreateRunRequest{
				Id:           &workflow.CreateRunRequest_RunId{RunId: runID(name)},
				Task:         &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec("env.main")},
				InputWrapper: &workflow.CreateRunRequest_Inputs{Inputs: intInputs(1)},
				RunSpec:      rs,
			})
			return err
		}
		recoverType := common.RelationType_RELATION_TYPE_RECOVER
		rerun := common.RelationType_RELATION_TYPE_RERUN
		otherProject := &common.RunIdentifier{Project: "q", Domain: "development", Name: "src"}
		for _, c := range []struct {
			name string
			rs   *task.RunSpec
			code connect.Code
			msg  string
		}{
			{"missing source", rel(recoverType, runID("nosuch")), connect.CodeNotFound, "run nosuch does not exist"},
			{"missing rerun source", rel(rerun, runID("nosuch")), connect.CodeNotFound, "run nosuch does not exist"},
			{"no source named", rel(recoverType, nil), connect.CodeInvalidArgument, "run_spec.relation.related_to is required"},
			{"another project", rel(recoverType, otherProject), connect.CodeInvalidArgument, "not in the new run's org, project and domain"},
			{"source still running", rel(recoverType, runID("src")), connect.CodeFailedPrecondition, "can be recovered once it has ended"},
			{"forced without recovery", rel(rerun, runID("src"), "a1"), connect.CodeInvalidArgument, "force_rerun_actions needs run_spec.relation of type RELATION_TYPE_RECOVER"},
			{"forced without relation", &task.RunSpec{Recover: &task.Recover{ForceRerunActions: []string{"a1"}}}, connect.CodeInvalidArgument, "force_rerun_actions needs"},
		} {
			err := create("bad", c.rs)
			if codeOf(err) != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: CreateRun = %v (%v), want %v saying %q", c.name, err, codeOf(err), c.code, c.msg)
			}
		}
		bad := store.RunKey{Org: "", Project: "p", Domain: "development", RunName: "bad"}
		if _, err := e.st.Actions.Get(ctx, bad.Action(store.RootName)); err == nil {
			t.Fatal("a refused CreateRun left a run behind")
		}

		// A rerun of a running run is fine; a recovery once it has ended.
		if err := create("rerun1", rel(rerun, runID("src"))); err != nil {
			t.Fatalf("rerun of a running run: %v", err)
		}
		src := store.RunKey{Project: "p", Domain: "development", RunName: "src"}
		if _, err := e.st.Actions.Update(ctx, src.Action(store.RootName), store.AnyVersion, store.Update{Phase: phase.Failed}); err != nil {
			t.Fatal(err)
		}
		if err := create("rec1", rel(recoverType, runID("src"), "a1", "no-such-action")); err != nil {
			t.Fatalf("recovery of an ended run: %v", err)
		}
		d, err := e.state.RunDetails(ctx, store.RunKey{Project: "p", Domain: "development", RunName: "rec1"})
		if err != nil {
			t.Fatal(err)
		}
		got := d.GetAction().GetMetadata().GetRelation()
		if got.GetRelationType() != recoverType || got.GetRelatedTo().GetName() != "src" {
			t.Errorf("the recovery's root relation = %v, want RECOVER of src", got)
		}
		if f := d.GetRunSpec().GetRecover().GetForceRerunActions(); len(f) != 2 {
			t.Errorf("stored force_rerun_actions = %v, want both names as sent", f)
		}
	})
}

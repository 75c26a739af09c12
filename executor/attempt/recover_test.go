package attempt_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// relatedTo is a run spec naming run src with relation kind.
func relatedTo(kind common.RelationType, src string, forced ...string) *task.RunSpec {
	rs := &task.RunSpec{Relation: &common.Relation{RelationType: kind,
		RelatedTo: &common.RunIdentifier{Project: "p", Domain: "development", Name: src}}}
	if len(forced) > 0 {
		rs.Recover = &task.Recover{ForceRerunActions: forced}
	}
	return rs
}

// The recovery step of planning, for a root action: reused only from a
// source action that succeeded with the same inputs and left its outputs,
// in a run that recovers (not a plain rerun) and does not force it.
func TestPlanRecover(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		c, _ := f.writer(t)
		tmpl := template("t.square", &core.Container{Command: []string{"a0"}}, nil)
		tmpl.Interface.Outputs = &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0",
			Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}
		succeed := func(a *store.Action, outputs string) *store.Action {
			t.Helper()
			p := mustPlan(t, c, a)
			if p.Launch == nil {
				t.Fatalf("source %s planned %+v, want a launch", a.RunName, p)
			}
			f.writeOutputs(t, p.Launch.OutDir, outputs)
			a, _, err := c.Apply(ctx, a, p.Spec, machine.Start{Attempt: 1}, attempt.Record{})
			if err == nil {
				a, _, err = c.Apply(ctx, a, p.Spec, machine.Succeeded{Attempt: 1}, attempt.Record{OutDir: p.Launch.OutDir})
			}
			if err != nil || a.Phase != phase.Succeeded {
				t.Fatalf("source %s: %v, phase %s", a.RunName, err, a.Phase)
			}
			return a
		}
		raw, err := proto.Marshal(&task.Outputs{Literals: []*task.NamedLiteral{{Name: "o0", Value: &core.Literal{Value: &core.Literal_Scalar{
			Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 9}}}}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		nine := string(raw)
		src := succeed(f.runWith(t, "rsrc", tmpl, 3, nil), nine)
		recoverType := common.RelationType_RELATION_TYPE_RECOVER

		rec := f.runWith(t, "rrec", tmpl, 3, relatedTo(recoverType, "rsrc", "no-such-action"))
		p := mustPlan(t, c, rec)
		outDir := runstate.OutputDir(rec, 1)
		if _, ok := p.Event.(machine.Recovered); !ok || p.Launch != nil || p.Record.OutDir != outDir || p.Record.RecoveredFrom != "rsrc" {
			t.Fatalf("recovery planned %+v, want RECOVERED from rsrc with the outputs copied to its own %s", p, outDir)
		}
		if got := f.readOutputs(t, outDir); got != nine {
			t.Fatalf("the recovered outputs read %q, want the source's %q", got, nine)
		}
		rec, _, err = c.Apply(ctx, rec, p.Spec, p.Event, p.Record)
		if err != nil || rec.Phase != phase.Recovered || rec.RecoveredFrom != "rsrc" {
			t.Fatalf("recorded recovery: %v, phase %s, recovered from %q", err, rec.Phase, rec.RecoveredFrom)
		}
		d, err := f.state.Details(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if from := d.GetMetadata().GetRecoveredFrom(); from.GetRun().GetName() != "rsrc" || from.GetName() != "a0" {
			t.Errorf("ActionMetadata.recovered_from = %v, want rsrc/a0", from)
		}
		uris, err := f.state.DataURIs(ctx, ident.ActionProto(rec.ActionKey))
		if err != nil || uris.GetOutputsUri() != contract.JoinURI(outDir, contract.OutputsFile) {
			t.Errorf("GetActionDataURIs of the recovered root: %v %v, want outputs at %s", uris, err, outDir)
		}
		if got := f.readOutputs(t, runstate.OutputDir(src, 1)); got != nine {
			t.Errorf("the source's outputs read %q after the recovery, want them unchanged", got)
		}

		// Everything else runs.
		failed := f.runWith(t, "rfailed", tmpl, 3, nil)
		if _, _, err := c.Fail(ctx, failed, nil, machine.KindUser, "ValueError", "boom"); err != nil {
			t.Fatal(err)
		}
		gone := succeed(f.runWith(t, "rgone", tmpl, 3, nil), nine)
		if err := f.env.Blobs.Delete(ctx, f.outputsKey(t, runstate.OutputDir(gone, 1))); err != nil {
			t.Fatal(err)
		}
		for i, c2 := range []struct {
			name string
			x    int64
			rs   *task.RunSpec
		}{
			{"other inputs", 4, relatedTo(recoverType, "rsrc")},
			{"forced", 3, relatedTo(recoverType, "rsrc", "a0")},
			{"a plain rerun", 3, relatedTo(common.RelationType_RELATION_TYPE_RERUN, "rsrc")},
			{"a failed source", 3, relatedTo(recoverType, "rfailed")},
			{"a source whose outputs are gone", 3, relatedTo(recoverType, "rgone")},
		} {
			a := f.runWith(t, fmt.Sprintf("rcase%d", i), tmpl, c2.x, c2.rs)
			if p := mustPlan(t, c, a); p.Launch == nil {
				t.Errorf("%s: planned %+v, want a launch", c2.name, p)
			}
		}
	})
}

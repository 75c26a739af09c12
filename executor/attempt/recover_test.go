package attempt_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
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

// marshal is m's wire form, as the SDK stores inputs.pb and outputs.pb.
func marshal(t *testing.T, m proto.Message) string {
	t.Helper()
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func intLiteral(v int64) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: v}}}}}}
}

// enqueueChild uploads inputs x=v for a child of root named name, as the
// SDK does before it enqueues one, and enqueues it through the path the
// SDK's EnqueueAction takes.
func (f *fixture) enqueueChild(t *testing.T, root *store.Action, name string, tmpl *core.TaskTemplate, v int64) *store.Action {
	t.Helper()
	ctx := context.Background()
	inputURI := runlayout.JoinURI(root.RunOutputBase, name, "inputs.pb")
	key, err := f.env.Blobs.Key(inputURI)
	if err != nil {
		t.Fatal(err)
	}
	in := marshal(t, &task.Inputs{Literals: []*task.NamedLiteral{{Name: "x", Value: intLiteral(v)}}})
	if err := f.env.Blobs.Put(ctx, key, []byte(in), nil); err != nil {
		t.Fatal(err)
	}
	parent := root.Name
	err = f.state.Enqueue(ctx, &actions.Action{
		ActionId:         &common.ActionIdentifier{Run: &common.RunIdentifier{Project: root.Project, Domain: root.Domain, Name: root.RunName}, Name: name},
		ParentActionName: &parent,
		InputUri:         inputURI,
		RunOutputBase:    root.RunOutputBase,
		Spec:             &actions.Action_Task{Task: &workflow.TaskAction{Spec: &task.TaskSpec{TaskTemplate: tmpl}}},
	})
	if err != nil {
		t.Fatalf("Enqueue %s in %s: %v", name, root.RunName, err)
	}
	a, err := f.state.Get(ctx, root.RunKey.Action(name))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The recovery step of planning. The root of a recovering run always
// launches (its code re-drives the tree); a child is reused only from a
// same-named source action that succeeded with the same inputs and left its
// outputs, in a run that recovers (not a plain rerun) and does not force it.
func TestPlanRecover(t *testing.T) {
	each(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		c, _ := f.writer(t)
		rootTmpl := template("t.fan", &core.Container{Command: []string{"a0"}}, nil)
		childTmpl := template("t.square", &core.Container{Command: []string{"c"}}, nil)
		childTmpl.Interface.Outputs = &core.VariableMap{Variables: []*core.VariableEntry{{Key: "o0",
			Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}
		nine := marshal(t, &task.Outputs{Literals: []*task.NamedLiteral{{Name: "o0", Value: intLiteral(9)}}})
		none := marshal(t, &task.Outputs{})

		start := func(a *store.Action) (*store.Action, attempt.Plan) {
			t.Helper()
			p := mustPlan(t, c, a)
			if _, recovered := p.Event.(machine.Recovered); recovered || p.Launch == nil {
				t.Fatalf("%s/%s planned %+v, want a launch", a.RunName, a.Name, p)
			}
			a, _, err := c.Apply(ctx, a, p.Spec, machine.Start{Attempt: 1}, attempt.Record{})
			if err != nil {
				t.Fatalf("start %s/%s: %v", a.RunName, a.Name, err)
			}
			return a, p
		}
		succeed := func(a *store.Action, outputs string) *store.Action {
			t.Helper()
			a, p := start(a)
			f.writeOutputs(t, p.Launch.OutDir, outputs)
			a, _, err := c.Apply(ctx, a, p.Spec, machine.Succeeded{Attempt: 1}, attempt.Record{OutDir: p.Launch.OutDir})
			if err != nil || a.Phase != phase.Succeeded {
				t.Fatalf("succeed %s/%s: %v, phase %s", a.RunName, a.Name, err, a.Phase)
			}
			return a
		}
		// source runs a run on x=3 whose root has a child c1 on x=3; ok
		// says whether the child succeeded (with outputs 9) or failed.
		source := func(name string, ok bool) *store.Action {
			t.Helper()
			root, p := start(f.runWith(t, name, rootTmpl, 3, nil))
			child := f.enqueueChild(t, root, "c1", childTmpl, 3)
			if ok {
				child = succeed(child, nine)
			} else if _, _, err := c.Fail(ctx, child, nil, machine.KindUser, "ValueError", "boom"); err != nil {
				t.Fatal(err)
			}
			f.writeOutputs(t, p.Launch.OutDir, none)
			root, _, err := c.Apply(ctx, root, p.Spec, machine.Succeeded{Attempt: 1}, attempt.Record{OutDir: p.Launch.OutDir})
			if err != nil || root.Phase != phase.Succeeded {
				t.Fatalf("source %s root: %v, phase %s", name, err, root.Phase)
			}
			return child
		}
		src := source("rsrc", true)
		recoverType := common.RelationType_RELATION_TYPE_RECOVER

		// The root runs again even though the source's root succeeded on
		// the same inputs; its child is recovered.
		root, _ := start(f.runWith(t, "rrec", rootTmpl, 3, relatedTo(recoverType, "rsrc", "no-such-action")))
		rec := f.enqueueChild(t, root, "c1", childTmpl, 3)
		p := mustPlan(t, c, rec)
		outDir := runstate.OutputDir(rec, 1)
		if _, ok := p.Event.(machine.Recovered); !ok || p.Launch != nil || p.Record.OutDir != outDir || p.Record.RecoveredFrom != "rsrc" {
			t.Fatalf("recovery of c1 planned %+v, want RECOVERED from rsrc with the outputs copied to its own %s", p, outDir)
		}
		if got := f.readOutputs(t, outDir); got != nine {
			t.Fatalf("the recovered outputs read %q, want the source's %q", got, nine)
		}
		rec, _, err := c.Apply(ctx, rec, p.Spec, p.Event, p.Record)
		if err != nil || rec.Phase != phase.Recovered || rec.RecoveredFrom != "rsrc" {
			t.Fatalf("recorded recovery: %v, phase %s, recovered from %q", err, rec.Phase, rec.RecoveredFrom)
		}
		d, err := f.state.Details(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if from := d.GetMetadata().GetRecoveredFrom(); from.GetRun().GetName() != "rsrc" || from.GetName() != "c1" {
			t.Errorf("ActionMetadata.recovered_from = %v, want rsrc/c1", from)
		}
		uris, err := f.state.DataURIs(ctx, ident.ActionProto(rec.ActionKey))
		if err != nil || uris.GetOutputsUri() != runlayout.JoinURI(outDir, runlayout.OutputsFile) {
			t.Errorf("GetActionDataURIs of the recovered child: %v %v, want outputs at %s", uris, err, outDir)
		}
		if got := f.readOutputs(t, runstate.OutputDir(src, 1)); got != nine {
			t.Errorf("the source's outputs read %q after the recovery, want them unchanged", got)
		}

		// Everything else runs.
		source("rfailed", false)
		gone := source("rgone", true)
		if err := f.env.Blobs.Delete(ctx, f.outputsKey(t, runstate.OutputDir(gone, 1))); err != nil {
			t.Fatal(err)
		}
		for i, c2 := range []struct {
			name string
			x    int64
			rs   *task.RunSpec
		}{
			{"other inputs", 4, relatedTo(recoverType, "rsrc")},
			{"forced", 3, relatedTo(recoverType, "rsrc", "c1")},
			{"a plain rerun", 3, relatedTo(common.RelationType_RELATION_TYPE_RERUN, "rsrc")},
			{"a failed source", 3, relatedTo(recoverType, "rfailed")},
			{"a source whose outputs are gone", 3, relatedTo(recoverType, "rgone")},
		} {
			root, _ := start(f.runWith(t, fmt.Sprintf("rcase%d", i), rootTmpl, 3, c2.rs))
			a := f.enqueueChild(t, root, "c1", childTmpl, c2.x)
			if p := mustPlan(t, c, a); p.Launch == nil {
				t.Errorf("%s: c1 planned %+v, want a launch", c2.name, p)
			}
		}
	})
}

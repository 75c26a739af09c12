package attempt

import (
	"context"
	"errors"
	"strings"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// The recovery step of an action's life, before the cache: in a run created
// to recover another (RunSpec.relation RECOVER), a sub-action whose
// same-named action of the source run succeeded (or was itself recovered)
// with the same inputs is not run again. It ends RECOVERED with a copy of the
// source's outputs in its own attempt directory, so the run's data stays its
// own and the parent reads them from the output_uri it is told, as after any
// attempt.
//
// The root always runs again: its code re-drives the tree, finding each
// sub-action recovered, and the run ends as its root does. The SDK counts
// only SUCCEEDED as a run's success (a run that ended RECOVERED fails
// raise_for_status), so a recovered run must end SUCCEEDED when its root
// succeeds.
//
// The SDK names child actions deterministically from their parent, task,
// inputs and call order, so the name finds the source action; the inputs are
// compared all the same (a task may ignore some inputs in its names).
// Everything else runs: what failed or never ran, what was forced
// (RunSpec.recover.force_rerun_actions), and every ancestor of a forced
// action, for a forced child only runs again when its parent does.

// recovery is what planning needs of a recovering run.
type recovery struct {
	source store.RunKey
	// mustRun are the action names that run even though they succeeded in
	// the source: the forced ones and their ancestors there.
	mustRun map[string]bool
}

// recoveryOf loads the recovery run's spec asks for (nil: none). The source
// run has ended (CreateRun checks it), so what it holds no longer changes.
func (c *Core) recoveryOf(ctx context.Context, run store.RunKey, rs *task.RunSpec) (*recovery, error) {
	r, ok := runstate.RecoveryOf(run, rs)
	if !ok {
		return nil, nil
	}
	rec := &recovery{source: r.Source, mustRun: map[string]bool{}}
	for name := range r.Forced {
		for name != "" && !rec.mustRun[name] {
			rec.mustRun[name] = true
			a, err := c.state.Get(ctx, r.Source.Action(name))
			if errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrInvalid) {
				break // unknown names are ignored
			} else if err != nil {
				return nil, err
			}
			name = ""
			if a.ParentName != nil {
				name = *a.ParentName
			}
		}
	}
	return rec, nil
}

// planRecover decides whether a's first attempt is recovered instead of
// run. done says the plan is decided: the action ends RECOVERED. The root
// never is (see above).
func (c *Core) planRecover(ctx context.Context, a *store.Action, spec *task.TaskSpec, ri *runInfo) (Plan, bool, error) {
	rec := ri.recovery
	if rec == nil || a.IsRoot() || a.Attempts != 1 || a.ActionType != store.ActionTypeTask || rec.mustRun[a.Name] {
		return Plan{}, false, nil
	}
	src, err := c.state.Get(ctx, rec.source.Action(a.Name))
	if errors.Is(err, errs.ErrNotFound) {
		return Plan{}, false, nil
	} else if err != nil {
		return Plan{}, false, err
	}
	if (src.Phase != phase.Succeeded && src.Phase != phase.Recovered) || src.ActionType != a.ActionType || src.Task.Name != a.Task.Name {
		return Plan{}, false, nil
	}
	if same, err := c.state.SameInputs(ctx, src, a); err != nil || !same {
		return Plan{}, false, err
	}
	needed := len(spec.GetTaskTemplate().GetInterface().GetOutputs().GetVariables()) > 0
	dir, ok, err := c.state.CopyOutputs(ctx, src, a, a.Attempts, needed)
	if err != nil || !ok {
		return Plan{}, false, err
	}
	return Plan{Event: machine.Recovered{Attempt: uint32(a.Attempts)}, Spec: spec,
		Record: Record{OutDir: dir, RecoveredFrom: src.RunName}}, true, nil
}

// seedTraces gives a's first attempt, about to run in a recovering run, the
// @flyte.trace results its source action recorded: the SDK replays a trace
// whose action it finds finished among its own children (it runs in the
// parent's process, so there is no plan of its own to recover). Each one is
// created RECOVERED, with a copy of its outputs under this run's base, before
// the parent starts and watches its children. Failed traces are not seeded:
// they run again.
func (c *Core) seedTraces(ctx context.Context, a *store.Action, ri *runInfo) error {
	rec := ri.recovery
	if rec == nil || a.Attempts != 1 {
		return nil
	}
	if c.opts.Fence() == 0 {
		return ErrNotWriter
	}
	// A waiting action is planned again and again: the traces seeded at an
	// earlier plan (or recorded by the parent itself) are skipped without
	// copying their outputs again.
	done := map[string]bool{}
	err := c.eachTrace(ctx, a.RunKey, store.ActionFilter{Parent: a.Name, Types: []store.ActionType{store.ActionTypeTrace}}, func(t *store.Action) error {
		done[t.Name] = t.RecoveredFrom != "" || t.Phase != phase.Recovered // a seed cut short before its last write is finished below
		return nil
	})
	if err != nil {
		return err
	}
	f := store.ActionFilter{Parent: a.Name, Types: []store.ActionType{store.ActionTypeTrace}, Phases: []phase.Phase{phase.Succeeded, phase.Recovered}}
	return c.eachTrace(ctx, rec.source, f, func(t *store.Action) error {
		if done[t.Name] {
			return nil
		}
		return c.seedTrace(ctx, a, t, rec)
	})
}

// eachTrace calls fn for every action of run that f matches.
func (c *Core) eachTrace(ctx context.Context, run store.RunKey, f store.ActionFilter, fn func(*store.Action) error) error {
	return store.EachAction(store.MaxPageSize, func(p store.Page) ([]store.Action, string, error) {
		return c.state.ListActionRows(ctx, run, f, p)
	}, fn)
}

func (c *Core) seedTrace(ctx context.Context, parent, src *store.Action, rec *recovery) error {
	if rec.mustRun[src.Name] {
		return nil
	}
	out, ok, err := c.state.CopyTraceOutputs(ctx, src, parent.RunOutputBase)
	if err != nil || !ok {
		return err
	}
	// The SDK uploads a trace's inputs under its own run's base before it
	// looks for the trace; the record points there, not into the source run.
	inputs := src.InputURI
	if rest, ok := strings.CutPrefix(inputs, strings.TrimRight(src.RunOutputBase, "/")+"/"); ok && src.RunOutputBase != "" {
		inputs = runlayout.JoinURI(parent.RunOutputBase, rest)
	}
	n := store.NewAction{
		Key: parent.RunKey.Action(src.Name), ParentName: parent.Name, ActionType: store.ActionTypeTrace,
		ShortName: src.ShortName, Phase: phase.Recovered, InputURI: inputs, RunOutputBase: parent.RunOutputBase,
		Group: src.Group, CreatedBy: src.CreatedBy, CreatedAt: src.CreatedAt,
	}
	if src.EndedAt != nil {
		n.EndedAt = *src.EndedAt
	}
	created, _, err := c.state.CreateRecord(ctx, n)
	if errors.Is(err, errs.ErrAlreadyExists) {
		return nil // the parent recorded it itself meanwhile: its own record stands
	} else if err != nil {
		return err
	}
	if created.RecoveredFrom == "" { // new, or a seed cut short before this write
		if _, err := c.state.Update(ctx, created.ActionKey, store.AnyVersion,
			store.Update{OutputURI: out, RecoveredFrom: rec.source.RunName, Fence: c.opts.Fence()}); err != nil {
			return err
		}
	}
	return nil
}

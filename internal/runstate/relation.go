package runstate

import (
	"context"
	"errors"
	"fmt"
	"path"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// A run may name the run it came from (RunSpec.relation): a rerun
// (RELATION_TYPE_RERUN) only records it; a recovery (RELATION_TYPE_RECOVER)
// also reuses the source run's succeeded actions (the attempt core's
// recovery step). The relation lives in the stored RunSpec, so nothing
// beyond the spec is needed to act on it later.

// maxForcedActions bounds RunSpec.recover.force_rerun_actions: a run has
// far fewer named actions worth forcing, and each one costs lookups.
const maxForcedActions = 1000

// checkRelation validates the relation of new run: a rerun or recovery
// names a run of the same project and domain that exists, and a recovery's
// source has ended (its actions are settled). Other relation types (a
// spawn from inside a task) are recorded as sent. force_rerun_actions
// needs a recovery; names it lists that the source does not have are
// ignored, as the SDK documents.
func (s *Service) checkRelation(ctx context.Context, run store.RunKey, spec *task.RunSpec) error {
	rel := spec.GetRelation()
	recovering := rel.GetRelationType() == common.RelationType_RELATION_TYPE_RECOVER
	if forced := spec.GetRecover().GetForceRerunActions(); len(forced) > 0 {
		if !recovering {
			return errs.Invalidf("run_spec.recover.force_rerun_actions needs run_spec.relation of type RELATION_TYPE_RECOVER")
		}
		if len(forced) > maxForcedActions {
			return errs.Invalidf("run_spec.recover.force_rerun_actions lists %d actions, at most %d are allowed", len(forced), maxForcedActions)
		}
	}
	switch rel.GetRelationType() {
	case common.RelationType_RELATION_TYPE_RERUN, common.RelationType_RELATION_TYPE_RECOVER:
	default:
		return nil
	}
	src, err := ident.Run("run_spec.relation.related_to", rel.GetRelatedTo())
	if err != nil {
		return err
	}
	if src.Org != run.Org || src.Project != run.Project || src.Domain != run.Domain {
		return errs.Invalidf("run_spec.relation.related_to: run %s is not in the new run's org, project and domain (%s/%s/%s)",
			src.RunName, run.Org, run.Project, run.Domain)
	}
	if src.RunName == run.RunName {
		return errs.Invalidf("run_spec.relation.related_to: a run cannot be related to itself")
	}
	root, err := s.store.Actions.Get(ctx, src.Action(store.RootName))
	if errors.Is(err, errs.ErrNotFound) {
		return errs.NotFoundf("run_spec.relation.related_to: run %s does not exist", src.RunName)
	} else if err != nil {
		return err
	}
	if recovering && !root.Phase.Terminal() {
		return fmt.Errorf("run_spec.relation.related_to: run %s is %s; a run can be recovered once it has ended: %w",
			src.RunName, phaseName(root.Phase, root.AbortRequestedAt != nil), errs.ErrPrecondition)
	}
	return nil
}

// Recovery is what a recovering run takes from its RunSpec.
type Recovery struct {
	// Source is the run whose succeeded actions are reused.
	Source store.RunKey
	// Forced are the action names to run again even though they succeeded.
	Forced map[string]bool
}

// RecoveryOf is the recovery a run's spec asks for; ok is false for a run
// that recovers nothing (no relation, or one that is not RECOVER).
func RecoveryOf(run store.RunKey, spec *task.RunSpec) (r Recovery, ok bool) {
	rel := spec.GetRelation()
	if rel.GetRelationType() != common.RelationType_RELATION_TYPE_RECOVER {
		return Recovery{}, false
	}
	src := run
	src.RunName = rel.GetRelatedTo().GetName()
	r = Recovery{Source: src, Forced: map[string]bool{}}
	for _, name := range spec.GetRecover().GetForceRerunActions() {
		r.Forced[name] = true
	}
	return r, true
}

// relationOf is a root action's ActionMetadata.relation: the relation its
// run was created with, nil for none. Only roots carry one (the SDK reads
// it there).
func relationOf(a *store.Action) *common.Relation {
	if !a.IsRoot() || len(a.RunSpec) == 0 {
		return nil
	}
	spec := &task.RunSpec{}
	if proto.Unmarshal(a.RunSpec, spec) != nil || spec.GetRelation() == nil {
		return nil
	}
	return spec.GetRelation()
}

// recoveredFrom is ActionMetadata.recovered_from: the source run's action
// whose outputs a RECOVERED action took, nil for an action that ran.
func recoveredFrom(a *store.Action) *common.ActionIdentifier {
	if a.RecoveredFrom == "" {
		return nil
	}
	src := a.RunKey
	src.RunName = a.RecoveredFrom
	return ident.ActionProto(src.Action(a.Name))
}

// SameInputs reports whether two task actions were given the same inputs:
// the decoded literals compared, not the locations, which differ per run.
// Inputs that were never stored read as none.
func (s *Service) SameInputs(ctx context.Context, a, b *store.Action) (bool, error) {
	var in [2]*task.Inputs
	for i, x := range []*store.Action{a, b} {
		in[i] = &task.Inputs{}
		key, err := s.inputsKey(x.InputURI)
		if err != nil {
			return false, nil // not ours to read: not provably the same
		}
		if err := s.readProto(ctx, key, in[i]); err != nil && !errors.Is(err, errs.ErrNotFound) {
			return false, err
		}
	}
	return proto.Equal(in[0], in[1]), nil
}

// CopyOutputs copies the outputs src produced (outputs.pb of its result)
// into dst's attempt directory and returns that directory. ok is false when
// there is nothing to take: src's result is not in storage, or its
// outputs.pb is gone while needed (a task that returns nothing writes none).
func (s *Service) CopyOutputs(ctx context.Context, src, dst *store.Action, attempt int32, needed bool) (dir string, ok bool, err error) {
	dir = OutputDir(dst, attempt)
	srcDir, err := s.resultDir(ctx, src)
	if err != nil {
		return "", false, err
	}
	from, err := s.blobs.Key(srcDir)
	if srcDir == "" || err != nil {
		return "", false, nil
	}
	to, err := s.blobs.Key(dir)
	if err != nil {
		return "", false, nil // the new run writes outside our storage: let it run
	}
	raw, err := s.blobs.Get(ctx, path.Join(from, runlayout.OutputsFile))
	if errors.Is(err, errs.ErrNotFound) {
		return dir, !needed, nil
	} else if err != nil {
		return "", false, err
	}
	if err := s.blobs.Put(ctx, path.Join(to, runlayout.OutputsFile), raw, nil); err != nil {
		return "", false, err
	}
	return dir, true, nil
}

// CopyTraceOutputs copies the outputs file a trace recorded into runBase,
// where the SDK lays out a trace of that name, and returns the copy's URI.
// ok is false when the trace recorded none in our storage.
func (s *Service) CopyTraceOutputs(ctx context.Context, src *store.Action, runBase string) (uri string, ok bool, err error) {
	recorded, err := s.outputURI(ctx, src)
	if err != nil || recorded == "" {
		return "", false, err
	}
	from, err := s.blobs.Key(recorded)
	if err != nil {
		return "", false, nil
	}
	uri = runlayout.JoinURI(runBase, src.Name, runlayout.OutputsFile)
	to, err := s.blobs.Key(uri)
	if err != nil {
		return "", false, nil
	}
	raw, err := s.blobs.Get(ctx, from)
	if errors.Is(err, errs.ErrNotFound) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	if err := s.blobs.Put(ctx, to, raw, nil); err != nil {
		return "", false, err
	}
	return uri, true, nil
}

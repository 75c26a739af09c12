package runstate

import (
	"context"
	"errors"
	"fmt"
	"path"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// OutputDir is where attempt n of a writes outputs.pb / error.pb: the layout
// the SDK also assumes (<run base>/<action>/<attempt>), so its fallback
// error lookup finds the same file.
func OutputDir(a *store.Action, attempt int32) string {
	return runlayout.AttemptDir(a.RunOutputBase, a.Name, uint32(attempt))
}

// Get returns an action (the store's error already names it).
func (s *Service) Get(ctx context.Context, key store.ActionKey) (*store.Action, error) {
	return s.store.Actions.Get(ctx, key)
}

// ActionDetails reads an action's full details.
func (s *Service) ActionDetails(ctx context.Context, key store.ActionKey) (*workflow.ActionDetails, error) {
	a, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.Details(ctx, a)
}

// RunDetails reads a run: its effective RunSpec and its root's details.
func (s *Service) RunDetails(ctx context.Context, run store.RunKey) (*workflow.RunDetails, error) {
	root, err := s.store.Actions.Get(ctx, run.Action(store.RootName))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run.RunName, err)
	}
	return s.runDetails(ctx, root)
}

func (s *Service) runDetails(ctx context.Context, root *store.Action) (*workflow.RunDetails, error) {
	d, err := s.Details(ctx, root)
	if err != nil {
		return nil, err
	}
	rs := &task.RunSpec{}
	if err := proto.Unmarshal(root.RunSpec, rs); err != nil {
		return nil, fmt.Errorf("run spec of %s is unreadable: %w", root.RunKey, err)
	}
	if err := s.withTriggers(ctx, map[store.RunKey]*workflow.ActionMetadata{root.RunKey: d.GetMetadata()}); err != nil {
		return nil, err
	}
	return &workflow.RunDetails{RunSpec: rs, Action: d}, nil
}

// ListRuns lists runs (root actions).
func (s *Service) ListRuns(ctx context.Context, f store.RunFilter, page store.Page) ([]*workflow.Run, string, error) {
	rows, next, err := s.store.Actions.ListRuns(ctx, f, page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*workflow.Run, len(rows))
	mds := make(map[store.RunKey]*workflow.ActionMetadata, len(rows))
	for i := range rows {
		out[i] = &workflow.Run{Action: ActionOf(&rows[i])}
		mds[rows[i].RunKey] = out[i].Action.GetMetadata()
	}
	if err := s.withTriggers(ctx, mds); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ListActions lists the actions of a run that f selects.
func (s *Service) ListActions(ctx context.Context, run store.RunKey, f store.ActionFilter, page store.Page) ([]*workflow.Action, string, error) {
	if _, err := s.store.Actions.Get(ctx, run.Action(store.RootName)); err != nil {
		return nil, "", fmt.Errorf("run %s: %w", run.RunName, err)
	}
	rows, next, err := s.store.Actions.ListActions(ctx, run, f, page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*workflow.Action, len(rows))
	for i := range rows {
		out[i] = ActionOf(&rows[i])
	}
	return out, next, nil
}

// inputsKey turns an input URI (a directory for runs, the file itself for
// children) into the key of the inputs.pb file.
func (s *Service) inputsKey(inputURI string) (string, error) {
	return s.blobs.Key(runlayout.InputFile(inputURI))
}

// InputsFile is the inputs.pb path a task process reads.
func (s *Service) InputsFile(a *store.Action) (string, error) {
	key, err := s.inputsKey(a.InputURI)
	if err != nil {
		return "", fmt.Errorf("action %s has an input uri outside storage: %w", a.ActionKey, err)
	}
	return s.blobs.URI(key), nil
}

// ActionData holds an action's inputs and (once it succeeded) outputs.
type ActionData struct {
	Inputs     *task.Inputs
	Outputs    *task.Outputs
	InputsURI  string
	OutputsURI string
}

// Data reads an action's inputs and outputs from storage (GetActionData).
func (s *Service) Data(ctx context.Context, id *common.ActionIdentifier) (ActionData, error) {
	key, err := ident.Action("action_id", id)
	if err != nil {
		return ActionData{}, err
	}
	a, err := s.Get(ctx, key)
	if err != nil {
		return ActionData{}, err
	}
	var out ActionData
	if a.ActionType == store.ActionTypeTask && a.InputURI != "" {
		ik, err := s.inputsKey(a.InputURI)
		if err != nil {
			return ActionData{}, err
		}
		out.Inputs = &task.Inputs{}
		out.InputsURI = s.blobs.URI(ik)
		if err := s.readProto(ctx, ik, out.Inputs); err != nil && !errors.Is(err, errs.ErrNotFound) {
			return ActionData{}, err
		}
	}
	if a.Phase != phase.Succeeded && a.Phase != phase.Recovered {
		return out, nil
	}
	if a.ActionType == store.ActionTypeCondition {
		out.Outputs = conditionOutputs(a)
		return out, nil
	}
	dir, err := s.resultDir(ctx, a)
	if err != nil {
		return ActionData{}, err
	}
	dirKey, err := s.blobs.Key(dir)
	if dir == "" || err != nil {
		return out, nil // a trace may record outputs outside our storage
	}
	outKey := path.Join(dirKey, runlayout.OutputsFile)
	out.Outputs = &task.Outputs{}
	out.OutputsURI = s.blobs.URI(outKey)
	if err := s.readProto(ctx, outKey, out.Outputs); err != nil && !errors.Is(err, errs.ErrNotFound) {
		return ActionData{}, err
	}
	return out, nil
}

// outputURI is the output directory of a's current attempt, as recorded.
func (s *Service) outputURI(ctx context.Context, a *store.Action) (string, error) {
	attempts, err := s.store.Actions.Attempts(ctx, a.ActionKey)
	if err != nil {
		return "", err
	}
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].OutputURI != "" {
			return attempts[i].OutputURI, nil
		}
	}
	return "", nil
}

// ReportURI is where attempt's report.html lives (CreateDownloadLink).
func (s *Service) ReportURI(ctx context.Context, id *common.ActionAttemptIdentifier) (string, error) {
	key, err := ident.Action("action_attempt_id.action_id", id.GetActionId())
	if err != nil {
		return "", err
	}
	a, err := s.Get(ctx, key)
	if err != nil {
		return "", err
	}
	// Compare as sent (uint32): converting first would turn 4294967295 into -1.
	n := id.GetAttempt()
	if n == 0 || a.Attempts <= 0 || n > uint32(a.Attempts) {
		return "", errs.Invalidf("action_attempt_id.attempt %d: %s has attempts 1..%d", n, key.Name, a.Attempts)
	}
	return OutputDir(a, int32(n)) + "/" + runlayout.ReportFile, nil
}

func (s *Service) readProto(ctx context.Context, key string, m proto.Message) error {
	raw, err := s.blobs.Get(ctx, key)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("%s is not a valid %s: %w", key, m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

// DataURIs answers GetActionDataURIs.
func (s *Service) DataURIs(ctx context.Context, id *common.ActionIdentifier) (*workflow.GetActionDataURIsResponse, error) {
	d, err := s.Data(ctx, id)
	if err != nil {
		return nil, err
	}
	return &workflow.GetActionDataURIsResponse{InputsUri: d.InputsURI, OutputsUri: d.OutputsURI}, nil
}

// CodeBundleURI finds the code bundle (the SDK's `--tgz` archive) that an
// attempt ran or a deployed task runs. Pickled bundles are not source and
// are not offered.
func (s *Service) CodeBundleURI(ctx context.Context, attempt *common.ActionAttemptIdentifier, id *task.TaskIdentifier) (string, error) {
	var sp *task.TaskSpec
	if attempt != nil {
		key, err := ident.Action("action_attempt_id.action_id", attempt.GetActionId())
		if err != nil {
			return "", err
		}
		a, err := s.Get(ctx, key)
		if err != nil {
			return "", err
		}
		if sp, err = s.Spec(ctx, a); err != nil {
			return "", err
		}
	} else {
		t, err := s.resolveTask(ctx, id, nil, "task_id", "task_spec")
		if err != nil {
			return "", err
		}
		sp = t.spec
	}
	tmpl := sp.GetTaskTemplate()
	if uri := tmpl.GetMetadata().GetCodeBundleUri(); uri != "" {
		return uri, nil
	}
	switch uri, option := codeBundle(tmpl); option {
	case "--tgz":
		return uri, nil
	case "--pkl":
		return "", errs.Invalidf("this task runs a pickled bundle, which is not source and is not offered for download")
	}
	return "", errs.NotFoundf("this task has no code bundle")
}

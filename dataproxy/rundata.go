package dataproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/errs"
)

// RunData is what the data plane needs from run state. The run service
// implements it and the manager sets Service.Runs; until then the calls
// that need it answer Unimplemented ("not available yet"). Implementations
// return errors in the errs vocabulary (errs.ErrNotFound for an unknown
// run or action, errs.ErrInvalid for bad identifiers).
type RunData interface {
	// WriteInputs stores the inputs of a run about to be created
	// (UploadInputs): it resolves the task (inline spec, task_id or
	// trigger), writes req.Inputs to storage and returns the directory
	// holding inputs.pb and the inputs hash. The directory is what CreateRun
	// later receives as offloaded_input_data.
	WriteInputs(ctx context.Context, req *dataproxy.UploadInputsRequest) (*common.OffloadedInputData, error)

	// ActionData returns an action's inputs and, once it has produced them,
	// its outputs (GetActionData). Missing outputs are not an error.
	ActionData(ctx context.Context, id *common.ActionIdentifier) (ActionData, error)

	// ReportURI returns the native URI (as blob.Store.URI gives it) of an
	// attempt's report, for CreateDownloadLink.
	ReportURI(ctx context.Context, id *common.ActionAttemptIdentifier) (string, error)

	// CodeBundleURI returns the native URI of the code bundle an attempt
	// ran (attempt set) or a deployed task runs (task set).
	CodeBundleURI(ctx context.Context, attempt *common.ActionAttemptIdentifier, task *task.TaskIdentifier) (string, error)

	// Logs sends an attempt's log lines (TailLogs): what exists, then, while
	// the attempt runs, new lines as they come, returning when it ends or
	// ctx is done. errs.ErrNotFound means "no logs yet" (the SDK retries).
	Logs(ctx context.Context, req *dataproxy.TailLogsRequest, send func(*dataproxy.TailLogsResponse) error) error
}

// ActionData is an action's data as GetActionData returns it.
type ActionData struct {
	Inputs     *task.Inputs
	Outputs    *task.Outputs
	InputsURI  string
	OutputsURI string
}

func notYet(method string) error {
	return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s is not available yet", method))
}

// UploadInputs stores a run's inputs ahead of CreateRun.
func (s *Service) UploadInputs(ctx context.Context, req *connect.Request[dataproxy.UploadInputsRequest]) (*connect.Response[dataproxy.UploadInputsResponse], error) {
	if s.Runs == nil {
		return nil, notYet("UploadInputs")
	}
	m := req.Msg
	if m.GetId() == nil {
		return nil, errs.Invalidf("one of run_id or project_id is required")
	}
	if m.GetTask() == nil {
		return nil, errs.Invalidf("one of task_id, task_spec or trigger_name is required")
	}
	out, err := s.Runs.WriteInputs(ctx, m)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&dataproxy.UploadInputsResponse{OffloadedInputData: out}), nil
}

// GetActionData returns an action's inputs and outputs inline.
func (s *Service) GetActionData(ctx context.Context, req *connect.Request[dataproxy.GetActionDataRequest]) (*connect.Response[dataproxy.GetActionDataResponse], error) {
	if s.Runs == nil {
		return nil, notYet("GetActionData")
	}
	if req.Msg.GetActionId() == nil {
		return nil, errs.Invalidf("action_id is required")
	}
	d, err := s.Runs.ActionData(ctx, req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&dataproxy.GetActionDataResponse{
		Inputs: d.Inputs, Outputs: d.Outputs, InputsUri: d.InputsURI, OutputsUri: d.OutputsURI,
	}), nil
}

// CreateDownloadLink signs a GET URL for an attempt's report or for the
// code bundle an attempt or a deployed task runs.
func (s *Service) CreateDownloadLink(ctx context.Context, req *connect.Request[dataproxy.CreateDownloadLinkRequest]) (*connect.Response[dataproxy.CreateDownloadLinkResponse], error) {
	m := req.Msg
	if s.Runs == nil {
		return nil, notYet("CreateDownloadLink")
	}
	expiresAt, err := s.expiry(m.GetExpiresIn())
	if err != nil {
		return nil, err
	}
	base, err := baseURL(ctx)
	if err != nil {
		return nil, err
	}
	var uri, what string
	switch m.GetArtifactType() {
	case dataproxy.ArtifactType_ARTIFACT_TYPE_REPORT:
		if m.GetActionAttemptId() == nil {
			return nil, errs.Invalidf("action_attempt_id is required for reports")
		}
		uri, err = s.Runs.ReportURI(ctx, m.GetActionAttemptId())
		what = "this attempt has no report"
	case dataproxy.ArtifactType_ARTIFACT_TYPE_CODE_BUNDLE:
		if m.GetActionAttemptId() == nil && m.GetTaskId() == nil {
			return nil, errs.Invalidf("action_attempt_id or task_id is required for code bundles")
		}
		uri, err = s.Runs.CodeBundleURI(ctx, m.GetActionAttemptId(), m.GetTaskId())
		what = "the code bundle is no longer in storage"
	default:
		return nil, errs.Invalidf("artifact_type must be ARTIFACT_TYPE_REPORT or ARTIFACT_TYPE_CODE_BUNDLE")
	}
	if err != nil {
		return nil, err
	}
	key, err := s.store.Key(uri)
	if err != nil {
		// Run state pointing outside the store is our bug, not the caller's.
		return nil, fmt.Errorf("download location %q: %v", uri, err)
	}
	ok, err := s.store.Exists(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.NotFoundf("%s", what)
	}
	link := s.signer.Sign(base, http.MethodGet, key, expiresAt, nil)
	if s.presign {
		p, err := s.store.Presign(ctx, http.MethodGet, key, expiresAt.Sub(s.now()), nil)
		if err != nil {
			return nil, err
		}
		link = p.URL
	}
	return connect.NewResponse(&dataproxy.CreateDownloadLinkResponse{
		PreSignedUrls: &dataproxy.PreSignedURLs{
			SignedUrl: []string{link},
			ExpiresAt: timestamppb.New(expiresAt),
		},
	}), nil
}

// TailLogs streams an attempt's logs.
func (s *Service) TailLogs(ctx context.Context, req *connect.Request[dataproxy.TailLogsRequest], stream *connect.ServerStream[dataproxy.TailLogsResponse]) error {
	if s.Runs == nil {
		return notYet("TailLogs")
	}
	if req.Msg.GetActionId() == nil {
		return errs.Invalidf("action_id is required")
	}
	err := s.Runs.Logs(ctx, req.Msg, stream.Send)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // the client went away
	}
	return err
}

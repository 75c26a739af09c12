package runs

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/runs/launchform"
)

// TranslatorService serves the launch-form translations a console needs
// (flyteidl2.workflow.TranslatorService), over package launchform.
type TranslatorService struct {
	state *runstate.Service
}

var _ workflowconnect.TranslatorServiceHandler = (*TranslatorService)(nil)

// NewTranslatorService builds the service; it reads actions' inputs and
// outputs through state.
func NewTranslatorService(state *runstate.Service) *TranslatorService {
	return &TranslatorService{state: state}
}

// Handler mounts the service.
func (s *TranslatorService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return workflowconnect.NewTranslatorServiceHandler(s, opts...)
}

// SetupTranslator mounts the TranslatorService on srv.
func SetupTranslator(srv *server.Server, state *runstate.Service) error {
	return srv.Mount(server.NewService(NewTranslatorService(state).Handler(srv.HandlerOptions()...)))
}

func (s *TranslatorService) TaskSpecToLaunchFormJson(_ context.Context, req *connect.Request[workflow.TaskSpecToLaunchFormJsonRequest]) (*connect.Response[workflow.TaskSpecToLaunchFormJsonResponse], error) {
	if req.Msg.GetTaskSpec().GetTaskTemplate() == nil {
		return nil, errs.Invalidf("task_spec.task_template is required")
	}
	form, err := launchform.TaskForm(req.Msg.GetTaskSpec())
	if err != nil {
		return nil, errs.Invalidf("task_spec: %v", err)
	}
	return connect.NewResponse(&workflow.TaskSpecToLaunchFormJsonResponse{Json: form}), nil
}

// LiteralsToLaunchFormJson renders literals as the form of variables:
// those sent, else those stored at literals_uri (which must be the inputs
// or outputs of owner.action_id, so a caller reads only run data it can
// name), else the inputs of owner.action_id.
func (s *TranslatorService) LiteralsToLaunchFormJson(ctx context.Context, req *connect.Request[workflow.LiteralsToLaunchFormJsonRequest]) (*connect.Response[workflow.LiteralsToLaunchFormJsonResponse], error) {
	literals, err := s.literalsOf(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	form, err := launchform.LiteralsForm(req.Msg.GetVariables(), literals)
	if err != nil {
		return nil, errs.Invalidf("literals: %v", err)
	}
	return connect.NewResponse(&workflow.LiteralsToLaunchFormJsonResponse{Json: form}), nil
}

func (s *TranslatorService) literalsOf(ctx context.Context, req *workflow.LiteralsToLaunchFormJsonRequest) ([]*task.NamedLiteral, error) {
	if req.GetTriggerId() != nil {
		return nil, errs.Invalidf("owner.trigger_id: triggers are not supported yet")
	}
	id := req.GetActionId()
	uri := req.GetLiteralsUri()
	switch {
	case len(req.GetLiterals()) > 0 && (uri != "" || id != nil):
		return nil, errs.Invalidf("send literals, or literals_uri with owner.action_id, or owner.action_id alone; not several")
	case len(req.GetLiterals()) > 0:
		return req.GetLiterals(), nil
	case id == nil && uri != "":
		return nil, errs.Invalidf("literals_uri needs owner.action_id, the action whose inputs or outputs it names")
	case id == nil:
		return nil, nil // nothing to fill in: the form of variables, empty
	}
	d, err := s.state.Data(ctx, id)
	if err != nil {
		return nil, err
	}
	switch uri {
	case "", d.InputsURI:
		return d.Inputs.GetLiterals(), nil
	case d.OutputsURI:
		return d.Outputs.GetLiterals(), nil
	}
	return nil, errs.Invalidf("literals_uri is neither the inputs nor the outputs of action %s", id.GetName())
}

func (s *TranslatorService) LaunchFormJsonToLiterals(_ context.Context, req *connect.Request[workflow.LaunchFormJsonToLiteralsRequest]) (*connect.Response[workflow.LaunchFormJsonToLiteralsResponse], error) {
	if req.Msg.GetJson() == nil {
		return nil, errs.Invalidf("json is required")
	}
	literals, err := launchform.FormLiterals(req.Msg.GetJson().AsMap())
	if err != nil {
		return nil, errs.Invalidf("json: %v", err)
	}
	return connect.NewResponse(&workflow.LaunchFormJsonToLiteralsResponse{Literals: literals}), nil
}

func (s *TranslatorService) JsonValuesToLiterals(_ context.Context, req *connect.Request[workflow.JsonValuesToLiteralsRequest]) (*connect.Response[workflow.JsonValuesToLiteralsResponse], error) {
	values := req.Msg.GetValues()
	if values == nil {
		values = &structpb.Struct{}
	}
	literals, err := launchform.Literals(req.Msg.GetVariables(), values.AsMap())
	if err != nil {
		return nil, errs.Invalidf("values: %v", err)
	}
	return connect.NewResponse(&workflow.JsonValuesToLiteralsResponse{Literals: literals}), nil
}

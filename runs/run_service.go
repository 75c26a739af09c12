// Package runs serves RunService, TaskService, ProjectService and the
// identity services.
package runs

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// RunService adapts the run state to flyteidl2.workflow.RunService.
type RunService struct {
	// Every procedure is implemented (SignalEvent in signal.go); the
	// embedding answers Unimplemented for procedures a newer IDL adds.
	workflowconnect.UnimplementedRunServiceHandler
	state *runstate.Service
}

var _ workflowconnect.RunServiceHandler = (*RunService)(nil)

// NewRunService builds the RunService over the shared run state.
func NewRunService(state *runstate.Service) *RunService { return &RunService{state: state} }

// Handler mounts the service.
func (s *RunService) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return workflowconnect.NewRunServiceHandler(s, opts...)
}

func (s *RunService) CreateRun(ctx context.Context, req *connect.Request[workflow.CreateRunRequest]) (*connect.Response[workflow.CreateRunResponse], error) {
	run, err := s.state.CreateRun(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.CreateRunResponse{Run: run}), nil
}

func (s *RunService) AbortRun(ctx context.Context, req *connect.Request[workflow.AbortRunRequest]) (*connect.Response[workflow.AbortRunResponse], error) {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := s.state.Abort(ctx, run.Action(store.RootName), req.Msg.GetReason(), authn.Subject(ctx)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.AbortRunResponse{}), nil
}

func (s *RunService) AbortAction(ctx context.Context, req *connect.Request[workflow.AbortActionRequest]) (*connect.Response[workflow.AbortActionResponse], error) {
	key, err := ident.Action("action_id", req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	if err := s.state.Abort(ctx, key, req.Msg.GetReason(), authn.Subject(ctx)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.AbortActionResponse{}), nil
}

func (s *RunService) GetRunDetails(ctx context.Context, req *connect.Request[workflow.GetRunDetailsRequest]) (*connect.Response[workflow.GetRunDetailsResponse], error) {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	d, err := s.state.RunDetails(ctx, run)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.GetRunDetailsResponse{Details: d}), nil
}

func (s *RunService) WatchRunDetails(ctx context.Context, req *connect.Request[workflow.WatchRunDetailsRequest], stream *connect.ServerStream[workflow.WatchRunDetailsResponse]) error {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return err
	}
	return s.state.WatchRun(ctx, run, func(d *workflow.RunDetails) error {
		return stream.Send(&workflow.WatchRunDetailsResponse{Details: d})
	})
}

func (s *RunService) GetActionDetails(ctx context.Context, req *connect.Request[workflow.GetActionDetailsRequest]) (*connect.Response[workflow.GetActionDetailsResponse], error) {
	key, err := ident.Action("action_id", req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	d, err := s.state.ActionDetails(ctx, key)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.GetActionDetailsResponse{Details: d}), nil
}

func (s *RunService) WatchActionDetails(ctx context.Context, req *connect.Request[workflow.WatchActionDetailsRequest], stream *connect.ServerStream[workflow.WatchActionDetailsResponse]) error {
	key, err := ident.Action("action_id", req.Msg.GetActionId())
	if err != nil {
		return err
	}
	return s.state.WatchAction(ctx, key, func(d *workflow.ActionDetails) error {
		return stream.Send(&workflow.WatchActionDetailsResponse{Details: d})
	})
}

// WatchClusterEvents streams one attempt's cluster events from the
// action's history: those so far, then new ones, until the attempt ended.
func (s *RunService) WatchClusterEvents(ctx context.Context, req *connect.Request[workflow.WatchClusterEventsRequest], stream *connect.ServerStream[workflow.WatchClusterEventsResponse]) error {
	key, err := ident.Action("id", req.Msg.GetId())
	if err != nil {
		return err
	}
	return s.state.WatchClusterEvents(ctx, key, req.Msg.GetAttempt(), func(ce []*workflow.ClusterEvent) error {
		return stream.Send(&workflow.WatchClusterEventsResponse{ClusterEvents: ce})
	})
}

func (s *RunService) GetActionData(ctx context.Context, req *connect.Request[workflow.GetActionDataRequest]) (*connect.Response[workflow.GetActionDataResponse], error) {
	d, err := s.state.Data(ctx, req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.GetActionDataResponse{Inputs: d.Inputs, Outputs: d.Outputs}), nil
}

func (s *RunService) GetActionDataURIs(ctx context.Context, req *connect.Request[workflow.GetActionDataURIsRequest]) (*connect.Response[workflow.GetActionDataURIsResponse], error) {
	resp, err := s.state.DataURIs(ctx, req.Msg.GetActionId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

func (s *RunService) ListRuns(ctx context.Context, req *connect.Request[workflow.ListRunsRequest]) (*connect.Response[workflow.ListRunsResponse], error) {
	f, page, err := listreq.ParseRuns(req.Msg.GetRequest())
	if err != nil {
		return nil, err
	}
	if err := runScope(req.Msg, &f); err != nil {
		return nil, err
	}
	runs, token, err := s.state.ListRuns(ctx, f, page)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.ListRunsResponse{Runs: runs, Token: token}), nil
}

// runScope applies ListRunsRequest.scope_by to f.
func runScope(req *workflow.ListRunsRequest, f *store.RunFilter) error {
	switch scope := req.GetScopeBy().(type) {
	case *workflow.ListRunsRequest_ProjectId:
		org, project, domain, err := ident.Project("project_id", scope.ProjectId)
		if err != nil {
			return err
		}
		f.Org, f.Project, f.Domain = org, project, domain
	case *workflow.ListRunsRequest_Org:
		f.Org = ident.Org(scope.Org)
	case *workflow.ListRunsRequest_TaskId:
		id, err := ident.Task("task_id", scope.TaskId)
		if err != nil {
			return err
		}
		f.Org, f.Project, f.Domain, f.TaskName, f.TaskVersion = id.Org, id.Project, id.Domain, id.Name, id.Version
	case *workflow.ListRunsRequest_TaskName:
		n := scope.TaskName
		if n.GetProject() == "" || n.GetDomain() == "" || n.GetName() == "" {
			return errs.Invalidf("task_name needs project, domain and name")
		}
		f.Org, f.Project, f.Domain, f.TaskName = n.GetOrg(), n.GetProject(), n.GetDomain(), n.GetName()
	case *workflow.ListRunsRequest_TriggerName:
		k, err := ident.Trigger("trigger_name", scope.TriggerName)
		if err != nil {
			return err
		}
		if (f.TaskName != "" && f.TaskName != k.TaskName) || (f.TriggerName != "" && f.TriggerName != k.Name) {
			return errs.Invalidf("trigger_name names trigger %q of task %s, but the filters name another", k.Name, k.TaskName)
		}
		f.Org, f.Project, f.Domain, f.TaskName, f.TriggerName = k.Org, k.Project, k.Domain, k.TaskName, k.Name
	case nil:
	}
	f.Paused = req.GetPausedActionsOnly()
	return nil
}

func (s *RunService) WatchRuns(ctx context.Context, req *connect.Request[workflow.WatchRunsRequest], stream *connect.ServerStream[workflow.WatchRunsResponse]) error {
	var f store.RunFilter
	switch t := req.Msg.GetTarget().(type) {
	case *workflow.WatchRunsRequest_ProjectId:
		org, project, domain, err := ident.Project("project_id", t.ProjectId)
		if err != nil {
			return err
		}
		f.Org, f.Project, f.Domain = org, project, domain
	case *workflow.WatchRunsRequest_Org:
		f.Org = ident.Org(t.Org)
	case *workflow.WatchRunsRequest_TaskId:
		id, err := ident.Task("task_id", t.TaskId)
		if err != nil {
			return err
		}
		f.Org, f.Project, f.Domain, f.TaskName, f.TaskVersion = id.Org, id.Project, id.Domain, id.Name, id.Version
	case nil:
		return errs.Invalidf("a target (project_id, org or task_id) is required")
	default:
		return errs.Invalidf("watching runs of a cluster is not supported")
	}
	return s.state.WatchRuns(ctx, f, func(runs []*workflow.Run) error {
		return stream.Send(&workflow.WatchRunsResponse{Runs: runs})
	})
}

func (s *RunService) ListActions(ctx context.Context, req *connect.Request[workflow.ListActionsRequest]) (*connect.Response[workflow.ListActionsResponse], error) {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	q, err := listreq.ParseActionQuery(req.Msg.GetRequest())
	if err != nil {
		return nil, err
	}
	actions, token, err := s.state.ListActions(ctx, run, q.Filter, q.Page)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.ListActionsResponse{Actions: actions, Token: token}), nil
}

func (s *RunService) WatchActions(ctx context.Context, req *connect.Request[workflow.WatchActionsRequest], stream *connect.ServerStream[workflow.WatchActionsResponse]) error {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return err
	}
	return s.state.WatchActions(ctx, run, req.Msg.GetFilter(), func(batch []*workflow.EnrichedAction) error {
		return stream.Send(&workflow.WatchActionsResponse{EnrichedActions: batch})
	})
}

// Package actions serves the services a parent task's controller uses to
// run children: ActionsService, and QueueService + StateService for SDKs
// that do not set _U_USE_ACTIONS. All three share the run state's
// semantics: idempotent enqueue, snapshot → sentinel → every update, and
// abort that cascades to every descendant.
package actions

import (
	"context"

	"connectrpc.com/connect"

	actionspb "fmgr.dev/gen/go/flyteidl2/actions"
	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
)

// Service implements the three services over one run state.
type Service struct {
	state *runstate.Service
}

// Setup mounts ActionsService, QueueService and StateService, all over
// state, on srv.
func Setup(srv *server.Server, state *runstate.Service) error {
	s := &Service{state: state}
	opts := srv.HandlerOptions()
	return srv.Mount(
		server.NewService(actionsconnect.NewActionsServiceHandler(&actionsService{s: s}, opts...)),
		server.NewService(workflowconnect.NewQueueServiceHandler(&queueService{s: s}, opts...)),
		server.NewService(workflowconnect.NewStateServiceHandler(&stateService{s: s}, opts...)),
	)
}

// watchChildren is WatchForUpdates and StateService.Watch.
func (s *Service) watchChildren(ctx context.Context, parent *common.ActionIdentifier, update func(*workflow.ActionUpdate) error, sentinel func() error) error {
	key, err := ident.Action("parent_action_id", parent)
	if err != nil {
		return err
	}
	return s.state.WatchChildren(ctx, key, update, sentinel)
}

// abort aborts an action and its descendants; aborting something that does
// not exist is NotFound (the SDK ignores it).
func (s *Service) abort(ctx context.Context, id *common.ActionIdentifier, reason string) error {
	key, err := ident.Action("action_id", id)
	if err != nil {
		return err
	}
	return s.state.Abort(ctx, key, reason, authn.Subject(ctx))
}

type actionsService struct {
	// Update serves a Kubernetes executor of the reference's kind, which
	// this manager does not need (its executor writes the database).
	actionsconnect.UnimplementedActionsServiceHandler
	s *Service
}

func (a *actionsService) Enqueue(ctx context.Context, req *connect.Request[actionspb.EnqueueRequest]) (*connect.Response[actionspb.EnqueueResponse], error) {
	if req.Msg.GetAction() == nil {
		return nil, errs.Invalidf("action is required")
	}
	if req.Msg.GetRunSpec() != nil && req.Msg.GetAction().GetParentActionName() != "" {
		// Children inherit their run's spec; a different one would be ignored silently otherwise.
		return nil, errs.Invalidf("run_spec: a child action inherits its run's spec and cannot carry its own")
	}
	if err := a.s.state.Enqueue(ctx, req.Msg.GetAction()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&actionspb.EnqueueResponse{}), nil
}

func (a *actionsService) WatchForUpdates(ctx context.Context, req *connect.Request[actionspb.WatchForUpdatesRequest], stream *connect.ServerStream[actionspb.WatchForUpdatesResponse]) error {
	return a.s.watchChildren(ctx, req.Msg.GetParentActionId(),
		func(u *workflow.ActionUpdate) error {
			return stream.Send(&actionspb.WatchForUpdatesResponse{Message: &actionspb.WatchForUpdatesResponse_ActionUpdate{ActionUpdate: u}})
		},
		func() error {
			return stream.Send(&actionspb.WatchForUpdatesResponse{Message: &actionspb.WatchForUpdatesResponse_ControlMessage{ControlMessage: &workflow.ControlMessage{Sentinel: true}}})
		})
}

func (a *actionsService) Abort(ctx context.Context, req *connect.Request[actionspb.AbortRequest]) (*connect.Response[actionspb.AbortResponse], error) {
	if err := a.s.abort(ctx, req.Msg.GetActionId(), req.Msg.GetReason()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&actionspb.AbortResponse{}), nil
}

type queueService struct {
	workflowconnect.UnimplementedQueueServiceHandler
	s *Service
}

func (q *queueService) EnqueueAction(ctx context.Context, req *connect.Request[workflow.EnqueueActionRequest]) (*connect.Response[workflow.EnqueueActionResponse], error) {
	m := req.Msg
	if m.GetParentActionName() == "" {
		return nil, errs.Invalidf("parent_action_name is required: runs are created with RunService.CreateRun")
	}
	a := &actionspb.Action{
		ActionId:         m.GetActionId(),
		ParentActionName: m.ParentActionName,
		InputUri:         m.GetInputUri(),
		RunOutputBase:    m.GetRunOutputBase(),
		Group:            m.GetGroup(),
		Subject:          m.GetSubject(),
	}
	switch spec := m.GetSpec().(type) {
	case *workflow.EnqueueActionRequest_Task:
		a.Spec = &actionspb.Action_Task{Task: spec.Task}
	case *workflow.EnqueueActionRequest_Trace:
		a.Spec = &actionspb.Action_Trace{Trace: spec.Trace}
	case *workflow.EnqueueActionRequest_Condition:
		a.Spec = &actionspb.Action_Condition{Condition: spec.Condition}
	}
	if err := q.s.state.Enqueue(ctx, a); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.EnqueueActionResponse{}), nil
}

func (q *queueService) AbortQueuedRun(ctx context.Context, req *connect.Request[workflow.AbortQueuedRunRequest]) (*connect.Response[workflow.AbortQueuedRunResponse], error) {
	run, err := ident.Run("run_id", req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := q.s.state.Abort(ctx, run.Action(store.RootName), req.Msg.GetReason(), authn.Subject(ctx)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.AbortQueuedRunResponse{}), nil
}

func (q *queueService) AbortQueuedAction(ctx context.Context, req *connect.Request[workflow.AbortQueuedActionRequest]) (*connect.Response[workflow.AbortQueuedActionResponse], error) {
	if err := q.s.abort(ctx, req.Msg.GetActionId(), req.Msg.GetReason()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.AbortQueuedActionResponse{}), nil
}

type stateService struct {
	// Put and Get carry opaque controller state that no SDK path uses.
	workflowconnect.UnimplementedStateServiceHandler
	s *Service
}

func (st *stateService) Watch(ctx context.Context, req *connect.Request[workflow.WatchRequest], stream *connect.ServerStream[workflow.WatchResponse]) error {
	return st.s.watchChildren(ctx, req.Msg.GetParentActionId(),
		func(u *workflow.ActionUpdate) error {
			return stream.Send(&workflow.WatchResponse{Message: &workflow.WatchResponse_ActionUpdate{ActionUpdate: u}})
		},
		func() error {
			return stream.Send(&workflow.WatchResponse{Message: &workflow.WatchResponse_ControlMessage{ControlMessage: &workflow.ControlMessage{Sentinel: true}}})
		})
}

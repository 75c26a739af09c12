package app

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// logsHandler serves AppLogsService.
type logsHandler struct{ s *Service }

// TailLogs sends the app's replicas (the SDK prints them), then batches of
// what they printed, per replica with structured lines, following until
// the client goes. An app whose replicas left no log is NOT_FOUND: the
// SDK retries that a few times before the first line.
func (h logsHandler) TailLogs(ctx context.Context, req *connect.Request[pb.TailLogsRequest], stream *connect.ServerStream[pb.TailLogsResponse]) error {
	s := h.s
	id, replica := req.Msg.GetAppId(), ""
	if r := req.Msg.GetReplicaId(); r != nil {
		id, replica = r.GetAppId(), r.GetName()
		if replica == "" {
			return errs.Invalidf("replica_id.name is required")
		}
	}
	k, err := keyOf(id)
	if err != nil {
		return err
	}
	if _, err := s.store.Get(ctx, k); err != nil {
		return err
	}
	if s.runtime == nil {
		return errs.NotFoundf("app %s has no logs: %s", k, s.noRuntime)
	}
	list := &pb.ReplicaIdentifierList{}
	for _, r := range s.runtime.Replicas(k) {
		if replica == "" || r.Name == replica {
			list.Replicas = append(list.Replicas, &pb.ReplicaIdentifier{AppId: id, Name: r.Name})
		}
	}
	if err := stream.Send(&pb.TailLogsResponse{Resp: &pb.TailLogsResponse_Replicas{Replicas: list}}); err != nil {
		return err
	}
	err = s.runtime.TailLogs(ctx, k, replica, func(name string, lines []*dataplane.LogLine) error {
		batch := &pb.LogLinesBatch{Logs: []*pb.LogLines{{ReplicaId: &pb.ReplicaIdentifier{AppId: id, Name: name}, StructuredLines: lines}}}
		return stream.Send(&pb.TailLogsResponse{Resp: &pb.TailLogsResponse_Batches{Batches: batch}})
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Lease sends the apps of the cluster's org (the manager is the one
// cluster), then the list again after each change, until the client goes.
func (s *Service) Lease(ctx context.Context, req *connect.Request[pb.LeaseRequest], stream *connect.ServerStream[pb.LeaseResponse]) error {
	if req.Msg.GetId() == nil {
		return errs.Invalidf("lease needs the cluster id")
	}
	org := req.Msg.GetId().GetOrganization()
	f := Filter{Org: ident.Org(org)}
	w := s.hub.subscribe(func(k Key) bool { return k.Org == f.Org })
	defer s.hub.unsubscribe(w)
	for {
		rows, _, err := s.store.List(ctx, f, store.Page{Limit: store.MaxPageSize})
		if err != nil {
			return err
		}
		resp := &pb.LeaseResponse{}
		for _, r := range rows {
			a, err := s.view(ctx, r, org)
			if err != nil {
				return err
			}
			resp.Apps = append(resp.Apps, a)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.lost:
			return connect.NewError(connect.CodeResourceExhausted, errors.New("this lease fell behind the changes to apps; lease again"))
		case <-w.ch:
		}
	drain:
		for {
			select {
			case <-w.ch:
			default:
				break drain
			}
		}
	}
}

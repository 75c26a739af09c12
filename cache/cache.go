// Package cache serves the cache services (flyteidl2.cacheservice and its
// v2): task outputs by cache key, scoped by org/project/domain, with
// reservations so that one of many identical actions computes them. The
// executors use the same repository in-process through Hook; a background
// sweep drops expired reservations and entries.
package cache

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "fmgr.dev/gen/go/flyteidl2/cacheservice"
	"fmgr.dev/gen/go/flyteidl2/cacheservice/cacheserviceconnect"
	v2 "fmgr.dev/gen/go/flyteidl2/cacheservice/v2"
	cachev2connect "fmgr.dev/gen/go/flyteidl2/cacheservice/v2/v2connect"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/server"
)

// Setup mounts both cache service versions over c on srv and registers
// its upkeep worker. v2 requests name their org/project/domain; v1 requests
// carry none, so v1 keys live in the empty scope.
func Setup(srv *server.Server, c *Cache) error {
	opts := srv.HandlerOptions()
	s := &service{repo: c.repo, blobs: c.blobs}
	srv.AddWorker("cache upkeep", c.Run)
	for _, m := range c.metrics.collectors() {
		if err := srv.Registry().Register(m); err != nil {
			return err
		}
	}
	return srv.Mount(
		server.NewService(cacheserviceconnect.NewCacheServiceHandler(&v1Handler{s: s}, opts...)),
		server.NewService(cachev2connect.NewCacheServiceHandler(&v2Handler{s: s}, opts...)),
	)
}

// service is the procedures of both versions over one scope.
type service struct {
	repo  *Repo
	blobs *blob.Store // where Put's output locations must lie
}

func checkKey(key string) error {
	if key == "" {
		return errs.Invalidf("key is required: the cache key of the task's inputs and version")
	}
	if len(key) > 512 {
		return errs.Invalidf("key is %d bytes long; at most 512 are allowed", len(key))
	}
	return nil
}

func scopeOf(id *v2.Identifier) (Scope, error) {
	if id.GetProject() == "" || id.GetDomain() == "" {
		return Scope{}, errs.Invalidf("identifier.project and identifier.domain are required")
	}
	return Scope{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain()}, nil
}

func (s *service) get(ctx context.Context, sc Scope, req *pb.GetCacheRequest) (*pb.GetCacheResponse, error) {
	if err := checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	e, err := s.repo.Get(ctx, sc, req.GetKey())
	if err != nil {
		return nil, err
	}
	return &pb.GetCacheResponse{Output: cachedOutput(e)}, nil
}

// cachedOutput is the wire form of e: always a URI, never literals.
func cachedOutput(e *Entry) *pb.CachedOutput {
	md := &pb.Metadata{}
	if len(e.Metadata) > 0 {
		_ = proto.Unmarshal(e.Metadata, md) // written by Put: readable
	}
	md.CreatedAt, md.LastUpdatedAt = timestamppb.New(e.CreatedAt), timestamppb.New(e.UpdatedAt)
	return &pb.CachedOutput{Output: &pb.CachedOutput_OutputUri{OutputUri: e.OutputURI}, Metadata: md}
}

func (s *service) put(ctx context.Context, sc Scope, req *pb.PutCacheRequest) error {
	if err := checkKey(req.GetKey()); err != nil {
		return err
	}
	out := req.GetOutput()
	if out.GetOutputLiterals() != nil {
		return errs.Invalidf("output.output_literals is not accepted: store the outputs and send output.output_uri")
	}
	if out.GetOutputUri() == "" {
		return errs.Invalidf("output.output_uri is required")
	}
	if err := s.checkOutputURI(sc, out.GetOutputUri()); err != nil {
		return err
	}
	md := out.GetMetadata()
	e := Entry{Org: sc.Org, Project: sc.Project, Domain: sc.Domain, CacheKey: req.GetKey(), OutputURI: out.GetOutputUri(),
		TaskName: md.GetSourceIdentifier().GetName()}
	if md.GetCreatedAt() != nil {
		if md.GetCreatedAt().CheckValid() != nil {
			return errs.Invalidf("output.metadata.created_at is not a valid timestamp")
		}
		e.CreatedAt = md.GetCreatedAt().AsTime()
	}
	if md != nil {
		keep := proto.Clone(md).(*pb.Metadata)
		keep.CreatedAt, keep.LastUpdatedAt = nil, nil // the row's columns are the truth
		e.Metadata, _ = proto.Marshal(keep)
	}
	ow := req.GetOverwrite()
	if ow.GetMaxAge() != nil && ow.GetMaxAge().CheckValid() != nil {
		return errs.Invalidf("overwrite.max_age is not a valid duration")
	}
	return s.repo.Put(ctx, e, ow.GetOverwrite(), ow.GetMaxAge().AsDuration())
}

// checkOutputURI refuses an entry whose outputs do not lie in the writer's
// own storage: a hit copies the entry's outputs into the run that hits, so
// an entry of project A pointing at project B's (or another domain's)
// outputs would hand them to A's runs. A v2 entry's outputs must be an
// attempt's output directory of a run of its org, project and domain
// (runs/<org|_>/<project>/<domain>/<run>/<action>/<attempt>). v1 entries
// live in the empty scope, which no run reads (a lookup never leaves its
// run's domain); theirs must still lie in the manager's storage.
func (s *service) checkOutputURI(sc Scope, uri string) error {
	var key string
	if s.blobs != nil {
		key, _ = s.blobs.Key(uri)
	}
	if key == "" {
		return errs.Invalidf("output.output_uri %q is outside the manager's storage", uri)
	}
	if sc != (Scope{}) && !runlayout.IsAttemptKeyIn(key, sc.Org, sc.Project, sc.Domain) {
		return errs.Invalidf("output.output_uri %q is not an attempt's output directory in the storage of project %q, domain %q (%s/<run>/<action>/<attempt>)",
			uri, sc.Project, sc.Domain, s.blobs.URI(runlayout.RunBaseKey(sc.Org, sc.Project, sc.Domain, "")))
	}
	return nil
}

func (s *service) delete(ctx context.Context, sc Scope, req *pb.DeleteCacheRequest) error {
	if err := checkKey(req.GetKey()); err != nil {
		return err
	}
	return s.repo.Delete(ctx, sc, req.GetKey())
}

func (s *service) reserve(ctx context.Context, sc Scope, req *pb.GetOrExtendReservationRequest) (*pb.GetOrExtendReservationResponse, error) {
	if err := checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	if req.GetOwnerId() == "" {
		return nil, errs.Invalidf("owner_id is required: who computes the outputs")
	}
	hb := req.GetHeartbeatInterval()
	if hb != nil && hb.CheckValid() != nil {
		return nil, errs.Invalidf("heartbeat_interval is not a valid duration")
	}
	r, err := s.repo.Reserve(ctx, sc, req.GetKey(), req.GetOwnerId(), hb.AsDuration())
	if err != nil {
		return nil, err
	}
	return &pb.GetOrExtendReservationResponse{Reservation: &pb.Reservation{
		Key:               r.CacheKey,
		OwnerId:           r.OwnerID,
		HeartbeatInterval: durationpb.New(time.Duration(r.HeartbeatSeconds) * time.Second),
		ExpiresAt:         timestamppb.New(r.ExpiresAt),
	}}, nil
}

func (s *service) release(ctx context.Context, sc Scope, req *pb.ReleaseReservationRequest) error {
	if err := checkKey(req.GetKey()); err != nil {
		return err
	}
	if req.GetOwnerId() == "" {
		return errs.Invalidf("owner_id is required: the owner whose reservation ends")
	}
	return s.repo.Release(ctx, sc, req.GetKey(), req.GetOwnerId())
}

// v1Handler serves flyteidl2.cacheservice.CacheService in the empty scope.
type v1Handler struct{ s *service }

func (h *v1Handler) Get(ctx context.Context, req *connect.Request[pb.GetCacheRequest]) (*connect.Response[pb.GetCacheResponse], error) {
	out, err := h.s.get(ctx, Scope{}, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (h *v1Handler) Put(ctx context.Context, req *connect.Request[pb.PutCacheRequest]) (*connect.Response[pb.PutCacheResponse], error) {
	if err := h.s.put(ctx, Scope{}, req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.PutCacheResponse{}), nil
}

func (h *v1Handler) Delete(ctx context.Context, req *connect.Request[pb.DeleteCacheRequest]) (*connect.Response[pb.DeleteCacheResponse], error) {
	if err := h.s.delete(ctx, Scope{}, req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.DeleteCacheResponse{}), nil
}

func (h *v1Handler) GetOrExtendReservation(ctx context.Context, req *connect.Request[pb.GetOrExtendReservationRequest]) (*connect.Response[pb.GetOrExtendReservationResponse], error) {
	out, err := h.s.reserve(ctx, Scope{}, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (h *v1Handler) ReleaseReservation(ctx context.Context, req *connect.Request[pb.ReleaseReservationRequest]) (*connect.Response[pb.ReleaseReservationResponse], error) {
	if err := h.s.release(ctx, Scope{}, req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ReleaseReservationResponse{}), nil
}

// v2Handler serves flyteidl2.cacheservice.v2.CacheService: the v1
// procedures in the scope each request names.
type v2Handler struct{ s *service }

func (h *v2Handler) Get(ctx context.Context, req *connect.Request[v2.GetCacheRequest]) (*connect.Response[pb.GetCacheResponse], error) {
	sc, err := scopeOf(req.Msg.GetIdentifier())
	if err != nil {
		return nil, err
	}
	out, err := h.s.get(ctx, sc, req.Msg.GetBaseRequest())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (h *v2Handler) Put(ctx context.Context, req *connect.Request[v2.PutCacheRequest]) (*connect.Response[pb.PutCacheResponse], error) {
	sc, err := scopeOf(req.Msg.GetIdentifier())
	if err != nil {
		return nil, err
	}
	if err := h.s.put(ctx, sc, req.Msg.GetBaseRequest()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.PutCacheResponse{}), nil
}

func (h *v2Handler) Delete(ctx context.Context, req *connect.Request[v2.DeleteCacheRequest]) (*connect.Response[pb.DeleteCacheResponse], error) {
	sc, err := scopeOf(req.Msg.GetIdentifier())
	if err != nil {
		return nil, err
	}
	if err := h.s.delete(ctx, sc, req.Msg.GetBaseRequest()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.DeleteCacheResponse{}), nil
}

func (h *v2Handler) GetOrExtendReservation(ctx context.Context, req *connect.Request[v2.GetOrExtendReservationRequest]) (*connect.Response[pb.GetOrExtendReservationResponse], error) {
	sc, err := scopeOf(req.Msg.GetIdentifier())
	if err != nil {
		return nil, err
	}
	out, err := h.s.reserve(ctx, sc, req.Msg.GetBaseRequest())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (h *v2Handler) ReleaseReservation(ctx context.Context, req *connect.Request[v2.ReleaseReservationRequest]) (*connect.Response[pb.ReleaseReservationResponse], error) {
	sc, err := scopeOf(req.Msg.GetIdentifier())
	if err != nil {
		return nil, err
	}
	if err := h.s.release(ctx, sc, req.Msg.GetBaseRequest()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ReleaseReservationResponse{}), nil
}

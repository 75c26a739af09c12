// Package dataproxy serves the data plane the Flyte SDK talks to:
// flyteidl2.dataproxy.DataProxyService (upload locations, run inputs and
// outputs, report links, logs), flyteidl2.cluster.ClusterService
// (SelectCluster, which every DataProxy call is routed through), and the
// signed-URL blob endpoint under /blobs/ that upload and download links
// point at.
//
// The manager composes it with New and mounts every Route from Handlers.
// Handlers return errors in the errs vocabulary; the server's interceptor
// maps them to Connect codes.
package dataproxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/gen/go/flyteidl2/cluster/clusterconnect"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/requrl"
)

const (
	// DefaultMaxUploadBytes bounds one signed PUT body.
	DefaultMaxUploadBytes int64 = 5 << 30
	// DefaultExpiresIn is the lifetime of a signed URL when the caller asks
	// for none.
	DefaultExpiresIn = time.Hour
	// MaxExpiresIn caps the lifetime of a signed URL.
	MaxExpiresIn = 7 * 24 * time.Hour
)

// Deps are what the service needs from the manager.
type Deps struct {
	// Store holds uploads, run inputs and outputs. Required.
	Store *blob.Store
	// Signer mints and checks the /blobs/ URLs (from storage.signingKey).
	// Required.
	Signer *blob.Signer
	// Runs answers the calls that need run state; nil until the run
	// service provides it (those calls then answer Unimplemented).
	Runs RunData
	// MaxUploadBytes bounds one signed PUT body; 0 means
	// DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// Presign hands out URLs presigned for the store itself instead of
	// /blobs/ URLs (storage.s3.presignedURLs; the store must be able to,
	// see blob.Store.CanPresign).
	Presign bool
	// Log receives operational errors; nil means slog.Default().
	Log *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// AuthorizeRead checks who may read the log endpoint (server.Server's,
	// set by Setup); nil lets everyone.
	AuthorizeRead func(r *http.Request, procedure string, msg proto.Message) (context.Context, error)
}

// Service implements DataProxyService and ClusterService and serves
// /blobs/.
type Service struct {
	// Runs is the extension point for run state (see RunData). It may be
	// nil, and may be set after New, before the server starts.
	Runs RunData

	store     *blob.Store
	signer    *blob.Signer
	maxUpload int64
	presign   bool
	log       *slog.Logger
	now       func() time.Time
	authRead  func(r *http.Request, procedure string, msg proto.Message) (context.Context, error)
}

var (
	_ dataproxyconnect.DataProxyServiceHandler = (*Service)(nil)
	_ clusterconnect.ClusterServiceHandler     = (*Service)(nil)
)

// New builds the service. It panics if Store or Signer is missing, which
// is a wiring bug.
func New(d Deps) *Service {
	if d.Store == nil || d.Signer == nil {
		panic("dataproxy.New: Store and Signer are required")
	}
	if d.Presign && !d.Store.CanPresign() {
		panic("dataproxy.New: Presign needs a store that can presign URLs")
	}
	s := &Service{Runs: d.Runs, store: d.Store, signer: d.Signer, maxUpload: d.MaxUploadBytes, presign: d.Presign, log: d.Log, now: d.Now, authRead: d.AuthorizeRead}
	if s.maxUpload <= 0 {
		s.maxUpload = DefaultMaxUploadBytes
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Route is one handler to mount: a Connect service's "/pkg.Service/"
// prefix, or (Plain) a net/http pattern: the /blobs/ prefix, the log
// endpoint.
type Route struct {
	Path    string
	Handler http.Handler
	// Plain routes take no Connect options and need no gzip handling.
	Plain bool
}

// Handlers returns the routes to mount: DataProxyService, ClusterService
// (both with opts), the signed-URL blob endpoint and the log endpoint that
// attempts' log links point at.
func (s *Service) Handlers(opts ...connect.HandlerOption) []Route {
	dpPath, dp := dataproxyconnect.NewDataProxyServiceHandler(s, opts...)
	clPath, cl := clusterconnect.NewClusterServiceHandler(s, opts...)
	return []Route{
		{Path: dpPath, Handler: dp},
		{Path: clPath, Handler: cl},
		{Path: blob.SignedPath, Handler: http.HandlerFunc(s.serveBlob), Plain: true},
		{Path: loglink.Pattern, Handler: http.HandlerFunc(s.serveLog), Plain: true},
	}
}

// baseURL is where this request's client reaches us; signed URLs and
// SelectCluster point there.
func baseURL(ctx context.Context) (string, error) {
	b := requrl.BaseURL(ctx)
	if b == "" {
		return "", errors.New("dataproxy: no base URL in the request context (requrl middleware missing)")
	}
	return b, nil
}

// expiry turns a requested lifetime into an absolute expiry: unset or zero
// means DefaultExpiresIn, longer than MaxExpiresIn is capped.
func (s *Service) expiry(d *durationpb.Duration) (time.Time, error) {
	ttl := DefaultExpiresIn
	if d != nil {
		if err := d.CheckValid(); err != nil {
			return time.Time{}, errs.Invalidf("expires_in is not a valid duration")
		}
		switch v := d.AsDuration(); {
		case v < 0:
			return time.Time{}, errs.Invalidf("expires_in must not be negative")
		case v == 0:
		case v > MaxExpiresIn:
			ttl = MaxExpiresIn
		default:
			ttl = v
		}
	}
	return s.now().Add(ttl).Truncate(time.Second), nil
}

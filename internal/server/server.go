// Package server is flyte-manager's HTTP front: one listener serving every
// Connect service (Connect, gRPC and gRPC-Web, over HTTP/1.1 and h2c), plain
// HTTP routes, /healthz, /readyz and /metrics, with one interceptor chain for
// logging, metrics and error masking, and a graceful shutdown.
//
// Typical use:
//
//	srv := server.New(cfg.Server, logger)
//	srv.AddCloser("database", closeDB)
//	srv.AddReadinessCheck("database", checkDB)
//	srv.Mount(server.NewService(workflowconnect.NewRunServiceHandler(impl, srv.HandlerOptions()...)))
//	if err := srv.Listen(); err != nil { ... }
//	err := srv.Serve(ctx) // until ctx is done, then drains and runs the closers
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/internal/tlscert"
)

// Service is one Connect service as returned by a generated
// New<Name>ServiceHandler: Path is its "/package.Service/" prefix.
type Service struct {
	Path    string
	Handler http.Handler
}

// NewService pairs what a generated New<Name>ServiceHandler returns, so a
// Setup can write srv.Mount(server.NewService(x.NewFooServiceHandler(impl, opts...))).
func NewService(path string, h http.Handler) Service { return Service{Path: path, Handler: h} }

// Route is a plain HTTP handler under a net/http ServeMux pattern, such as
// "PUT /blobs/{key...}". Routes get neither gzip pre-decompression nor the
// Connect interceptors.
type Route struct {
	Pattern string
	Handler http.Handler
}

// CheckFunc reports whether a dependency is ready; a nil error means ready.
type CheckFunc func(ctx context.Context) error

// CloseFunc releases a resource during shutdown.
type CloseFunc func(ctx context.Context) error

// defaultReadHeaderTimeout bounds how long a client may take to send request
// headers. http.Server's ReadTimeout and WriteTimeout stay unset: they would
// cut long server streams. Bodies have their own progress-based deadline
// (limitBodyReads) and idle connections server.idleTimeout.
const defaultReadHeaderTimeout = 10 * time.Second

// Server is the process's single HTTP server. Configure it (Mount, Handle,
// AddReadinessCheck, AddCloser, AddWorker) before Serve. Each service
// package has one Setup(srv, deps...) that does all of this for itself.
type Server struct {
	cfg      config.Server
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *rpcMetrics
	caps     *streamCap
	mux      *http.ServeMux
	errors   *connect.ErrorWriter
	guard    *hostGuard

	readHeaderTimeout time.Duration

	mu         sync.Mutex
	checks     []namedCheck
	closers    []namedCloser
	workers    []namedWorker
	mounted    map[string]bool
	ln         net.Listener
	tls        *tls.Config    // server.tls: nil serves plain HTTP
	extra      []net.Listener // ListenAlso's, served by the same http.Server
	httpServer *http.Server
	draining   atomic.Bool
	auth       atomic.Pointer[Auth] // nil: auth.mode off
	tracer     atomic.Value         // tracerBox once SetTracerProvider was called

	// streams is cancelled when shutdown begins: server streams end then,
	// while unary calls may run to completion.
	streams       context.Context
	cancelStreams context.CancelFunc
	closeOnce     sync.Once
	closeErr      error
}

type namedCheck struct {
	name string
	fn   CheckFunc
}

type namedCloser struct {
	name string
	fn   CloseFunc
}

// New returns a Server for cfg that logs to logger (slog.Default if nil).
func New(cfg config.Server, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	s := &Server{
		cfg:               cfg,
		log:               logger,
		registry:          reg,
		metrics:           newRPCMetrics(reg),
		caps:              newStreamCap(cfg.MaxStreamsPerClient, cfg.MaxGlobalWatchesPerClient, reg),
		mux:               http.NewServeMux(),
		errors:            connect.NewErrorWriter(),
		guard:             newHostGuard(cfg, logger),
		readHeaderTimeout: defaultReadHeaderTimeout,
		mounted:           map[string]bool{},
	}
	s.streams, s.cancelStreams = context.WithCancel(context.Background())
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", metricsHandler(reg))
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// Registry is the server's Prometheus registry, served on /metrics; other
// packages register their collectors here.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Logger is the logger the server was built with.
func (s *Server) Logger() *slog.Logger { return s.log }

// HandlerOptions are the options every Connect service must be built with:
// the interceptor chain (request log and metrics, authentication (auth.go),
// the per-client stream
// caps (streamcap.go), error masking, the org of identifiers (orgs.go),
// panic recovery) and the request size limit.
func (s *Server) HandlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithInterceptors(&observeInterceptor{s: s}, &authInterceptor{s: s}, &streamCapInterceptor{c: s.caps}, &maskInterceptor{s: s}, &orgInterceptor{cfg: s.cfg.Orgs}),
		connect.WithRecover(recoverPanic),
		connect.WithReadMaxBytes(int(s.cfg.MaxRequestBytes)),
		connect.WithCompressMinBytes(1024),
	}
}

// Mount serves Connect services. Each handler is wrapped with the request
// body pre-decompression; the handler itself must have been built with
// HandlerOptions.
func (s *Server) Mount(services ...Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, svc := range services {
		if !strings.HasPrefix(svc.Path, "/") || !strings.HasSuffix(svc.Path, "/") || svc.Handler == nil {
			return fmt.Errorf("server: service path %q must look like /package.Service/ and have a handler", svc.Path)
		}
		if s.mounted[svc.Path] {
			return fmt.Errorf("server: service %s mounted twice", svc.Path)
		}
		s.mounted[svc.Path] = true
		s.mux.Handle(svc.Path, s.decompressRequests(svc.Handler))
	}
	return nil
}

// Handle serves plain HTTP routes.
func (s *Server) Handle(routes ...Route) error {
	for _, r := range routes {
		if r.Pattern == "" || r.Handler == nil {
			return fmt.Errorf("server: route %q needs a pattern and a handler", r.Pattern)
		}
		if err := registerRoute(s.mux, r); err != nil {
			return err
		}
	}
	return nil
}

func registerRoute(mux *http.ServeMux, r Route) (err error) {
	defer func() {
		// ServeMux panics on conflicting patterns; report it as an error.
		if p := recover(); p != nil {
			err = fmt.Errorf("server: route %q: %v", r.Pattern, p)
		}
	}()
	mux.Handle(r.Pattern, r.Handler)
	return nil
}

// AddReadinessCheck makes /readyz depend on fn.
func (s *Server) AddReadinessCheck(name string, fn CheckFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, namedCheck{name, fn})
}

// AddCloser registers fn to run at shutdown, after the listener has drained.
// Closers run in reverse order of registration.
func (s *Server) AddCloser(name string, fn CloseFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, namedCloser{name, fn})
}

// Handler is the complete HTTP handler (useful to test without a listener).
// It bounds how long request bodies may stall (limitBodyReads), refuses
// unknown Hosts and foreign origins (hostGuard), then records
// each request's base URL for requrl.BaseURL, which therefore only ever
// names a Host the guard accepted (or the external URL).
func (s *Server) Handler() http.Handler {
	return s.limitBodyReads(s.guard.wrap(requrl.Middleware(s.cfg.ExternalURL, s.mux)))
}

// Listen binds the configured address. Serve calls it if it was not called;
// calling it first lets the caller learn the address (Addr) of port 0.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	tc, err := s.tlsConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.ListenAddr())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.ListenAddr(), err)
	}
	s.ln, s.tls = ln, tc
	return nil
}

// tlsConfig is server.tls's: the configured certificate, or one generated
// into the data directory, offering HTTP/2 and HTTP/1.1 by ALPN.
func (s *Server) tlsConfig() (*tls.Config, error) {
	t := s.cfg.TLS
	if !t.Enabled {
		return nil, nil
	}
	var cert tls.Certificate
	var err error
	if t.CertFile != "" {
		cert, err = tlscert.Load(t.CertFile, t.KeyFile)
	} else {
		hosts := []string{s.cfg.Host}
		if u, perr := url.Parse(s.cfg.ExternalURL); perr == nil && s.cfg.ExternalURL != "" {
			hosts = append(hosts, u.Hostname())
		}
		cert, _, err = tlscert.Ensure(t.GeneratedDir, "flyte-manager", hosts...)
	}
	if err != nil {
		return nil, fmt.Errorf("server.tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// TLS reports whether the API port serves https.
func (s *Server) TLS() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tls != nil
}

// ListenAlso binds one more address that Serve serves the same handler on
// (the console's 127.0.0.1:8080 for the SDK's links). The host guard
// accepts loopback names on whichever port a connection arrived at, so
// pages served there may call the APIs on their own origin. Call it
// before Serve; a bind error is returned for the caller to judge.
func (s *Server) ListenAlso(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extra = append(s.extra, ln)
	return ln.Addr(), nil
}

// Addr is the bound address, nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve serves until ctx is done, then shuts down gracefully: it stops
// accepting, lets in-flight unary calls finish (up to the shutdown timeout),
// ends server streams, and runs the closers in reverse order. The closers
// also run if serving fails. The returned error is nil after a clean stop.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return errors.Join(err, s.Close())
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	s.mu.Lock()
	s.httpServer = &http.Server{
		Handler:           s.Handler(),
		Protocols:         &protocols,
		ReadHeaderTimeout: s.readHeaderTimeout,
		// Connections without a request in progress (HTTP/1.1) or without
		// open streams (HTTP/2) are closed after this; a long stream keeps
		// its connection busy, so it is not affected.
		IdleTimeout: s.cfg.IdleTimeout,
		HTTP2:       &http.HTTP2Config{MaxConcurrentStreams: s.cfg.MaxConcurrentStreams},
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		TLSConfig:   s.tls,
	}
	hs, ln, extra, useTLS := s.httpServer, s.ln, s.extra, s.tls != nil
	s.mu.Unlock()

	served := make(chan error, 1)
	go func() {
		if useTLS {
			served <- hs.ServeTLS(ln, "", "")
			return
		}
		served <- hs.Serve(ln)
	}()
	// Shutdown closes these listeners too; their Serve then returns
	// ErrServerClosed, and an earlier failure is only logged: the main
	// listener is what the manager lives by.
	for _, l := range extra {
		go func() {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Warn("serving the extra listener failed", "addr", l.Addr().String(), "error", err)
			}
		}()
	}

	select {
	case err := <-served:
		s.cancelStreams()
		return errors.Join(fmt.Errorf("serving: %w", err), s.Close())
	case <-ctx.Done():
	}

	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	s.draining.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- hs.Shutdown(shutdownCtx) }()
	s.cancelStreams()
	var errShutdown error
	if err := <-drained; err != nil {
		s.log.Warn("in-flight requests did not finish in time; closing connections", "error", err)
		errShutdown = hs.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errShutdown = errors.Join(errShutdown, err)
	}
	return errors.Join(errShutdown, s.Close())
}

// Close runs the registered closers once, in reverse order, each bounded by
// the shutdown timeout. Serve calls it; call it directly only when Serve is
// never reached.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		closers := append([]namedCloser(nil), s.closers...)
		for _, l := range s.extra {
			_ = l.Close() // already closed after Serve; not yet if it never ran
		}
		s.mu.Unlock()
		var all []error
		for i := len(closers) - 1; i >= 0; i-- {
			c := closers[i]
			ctx, cancel := context.WithTimeout(context.Background(), s.closeTimeout())
			if err := c.fn(ctx); err != nil {
				s.log.Error("closing", "component", c.name, "error", err)
				all = append(all, fmt.Errorf("closing %s: %w", c.name, err))
			} else {
				s.log.Debug("closed", "component", c.name)
			}
			cancel()
		}
		s.closeErr = errors.Join(all...)
	})
	return s.closeErr
}

func (s *Server) closeTimeout() time.Duration {
	if s.cfg.ShutdownTimeout > 0 {
		return s.cfg.ShutdownTimeout
	}
	return 30 * time.Second
}

// notFound answers paths no handler claims. A request that looks like an RPC
// for a service this server does not mount gets a protocol-correct
// Unimplemented error; anything else a plain 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if isProcedurePath(r.URL.Path) && s.errors.IsSupported(r) {
		err := connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s is not implemented by this server", r.URL.Path))
		_ = s.errors.Write(w, r, err)
		return
	}
	http.NotFound(w, r)
}

// isProcedurePath matches "/package.Service/Method".
func isProcedurePath(p string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return ok && strings.Contains(service, ".") && method != "" && !strings.Contains(method, "/")
}

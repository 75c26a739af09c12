// Package compose is the manager's composition: it opens the database and the
// blob store, builds the run state with the configured executor, mounts
// every service and serves them. The flyte-manager command (manager/) and
// the executor's development binary (executor/cmd/manager) both run it, so
// the two cannot drift apart.
package compose

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"fmgr.dev/apikey"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/oidcauth"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/taskcred"
	"fmgr.dev/internal/tracing"
)

// Deps is what Setup builds the services from.
type Deps struct {
	Config *config.Config
	DB     *gorm.DB
	Log    *slog.Logger
	Server *server.Server
	// Version is the binary's version.
	Version string
	// Tracing is the tracer provider (nil or off: no spans).
	Tracing *tracing.Provider
	// KubeAPI is the Kubernetes-style API's handler, which Run serves on
	// its own listener (nil when kubeAPI.enabled is false); Setup builds it.
	KubeAPI http.Handler
	// S3Endpoint is the S3 endpoint's URL when Setup started it;
	// S3TaskLocations says tasks get s3 locations through it.
	S3Endpoint      string
	S3TaskLocations bool
}

// Options are what Run needs besides the configuration.
type Options struct {
	// Stdout receives the banner (where the manager listens, how to point
	// the SDK at it); Stderr the log.
	Stdout, Stderr io.Writer
	// Version is the binary's version, shown in the banner and the log.
	Version string
}

// statisticsEvery is how often the manager looks whether PostgreSQL's
// statistics of the tables that grow with runs need refreshing
// (db.KeepStatistics).
const statisticsEvery = 5 * time.Second

// Run runs the manager until ctx is done: it prepares the data dir, opens
// and migrates the database, builds the services and serves them.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	logger, err := newLogger(cfg.Log, o.Stderr)
	if err != nil {
		return err
	}
	slog.SetDefault(logger)

	if err := cfg.Prepare(); err != nil {
		return err
	}
	srv := server.New(cfg.Server, logger)
	tp, err := tracing.New(ctx, cfg.Telemetry.Tracing, logger)
	if err != nil {
		return err
	}
	if tp.Enabled() {
		// Registered first, so closed last: the spans of the shutdown
		// itself are exported too.
		srv.AddCloser("tracing", tp.Shutdown)
		srv.SetTracerProvider(tp)
	}

	gdb, err := OpenDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	srv.AddCloser("database", func(context.Context) error { return db.Close(gdb) })
	if err := registerStorageMetrics(srv, gdb, cfg.Home); err != nil {
		return closeAfter(srv, err)
	}
	if err := db.Migrate(ctx, gdb); err != nil {
		return closeAfter(srv, fmt.Errorf("migrating the database: %w", err))
	}
	srv.AddReadinessCheck("database", func(ctx context.Context) error { return db.Check(ctx, gdb) })
	if db.Dialect(gdb) == db.Postgres {
		srv.AddWorker("planner statistics", func(ctx context.Context) error {
			return db.KeepStatistics(ctx, gdb, statisticsEvery, logger)
		})
	}

	if err := setupAuth(cfg, gdb, srv, logger); err != nil {
		return closeAfter(srv, err)
	}
	if err := ensureBootstrapKey(ctx, logger, cfg, gdb); err != nil {
		return closeAfter(srv, err)
	}
	notices := noticeAuthMode(ctx, logger, cfg, gdb, srv)
	d := &Deps{Config: cfg, DB: gdb, Log: logger, Server: srv, Version: o.Version, Tracing: tp}
	if err := Setup(ctx, d); err != nil {
		return closeAfter(srv, fmt.Errorf("setting up services: %w", err))
	}
	logger.Debug("mounted services", "services", strings.Join(srv.Services(), ","))
	if err := srv.Listen(); err != nil {
		return closeAfter(srv, err)
	}
	consoleAddr := listenConsole(logger, cfg, srv)
	listenApps(logger, cfg, srv)
	kubeAddr := listenKubeAPI(logger, cfg, srv, d.KubeAPI)
	// Workers start once the server listens: the executor tells task
	// processes the address it got.
	srv.StartWorkers()
	logger.Info("serving", "addr", srv.Addr().String(), "home", cfg.Home, "version", o.Version)
	printBanner(o.Stdout, o.Version, cfg, srv.Addr(), consoleAddr)
	if kubeAddr != nil {
		fmt.Fprintf(o.Stdout, "\nkubectl (taskactions.flyte.org/v1):\n  https://%s\n  flyte-manager kubeconfig > ~/.kube/flyte.yaml && KUBECONFIG=~/.kube/flyte.yaml kubectl get taskactions\n", kubeAddr)
	}
	if d.S3Endpoint != "" {
		bucket := cfg.Storage.S3Endpoint.Bucket
		tasks := ""
		if d.S3TaskLocations {
			tasks = "; tasks get s3://" + bucket + "/ locations through it"
		}
		fmt.Fprintf(o.Stdout, "\nS3 endpoint (bucket %s%s):\n  %s\n  eval \"$(flyte-manager storage env)\"   # what a client needs to read outputs itself\n", bucket, tasks, d.S3Endpoint)
	}
	printAuthNotices(o.Stdout, notices)
	return srv.Serve(ctx)
}

// listenConsole opens the console's second address when the configuration
// asks for one (config.ConsoleLocalListen); a busy port only costs the
// SDK's console links, so it is logged and the manager carries on.
func listenConsole(logger *slog.Logger, cfg *config.Config, srv *server.Server) net.Addr {
	addr := cfg.ConsoleLocalListen()
	if addr == "" {
		return nil
	}
	bound, err := srv.ListenAlso(addr)
	if err != nil {
		logger.Warn("not serving the console on its local address: the SDK's console links will not open; the console is still on the API's port under /v2/",
			"addr", addr, "error", err)
		return nil
	}
	logger.Info("serving the console", "addr", bound.String())
	return bound
}

// listenApps opens apps.listen, the apps' own port, when configured; a busy
// port is logged (the apps stay on the API's port under apps.pathPrefix).
func listenApps(logger *slog.Logger, cfg *config.Config, srv *server.Server) net.Addr {
	addr := cfg.Apps.Listen
	if addr == "" {
		return nil
	}
	bound, err := srv.ListenAlso(addr)
	if err != nil {
		logger.Warn("not serving apps on their own address; they are still on the API's port under apps.pathPrefix",
			"addr", addr, "error", err)
		return nil
	}
	logger.Info("serving apps", "addr", bound.String(), "pathPrefix", cfg.Apps.PathPrefix)
	return bound
}

// closeAfter runs the registered closers after a failed start.
func closeAfter(srv *server.Server, err error) error {
	if cerr := srv.Close(); cerr != nil {
		return fmt.Errorf("%w (and while closing: %v)", err, cerr)
	}
	return err
}

// OpenDatabase opens the configured database, applying database.maxOpenConns
// when set.
func OpenDatabase(ctx context.Context, cfg *config.Config) (*gorm.DB, error) {
	gdb, err := db.Open(ctx, cfg.Database.DSN)
	if err != nil {
		return nil, err
	}
	if n := cfg.Database.MaxOpenConns; n > 0 {
		sqlDB, err := gdb.DB()
		if err != nil {
			_ = db.Close(gdb)
			return nil, err
		}
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n)
	}
	return gdb, nil
}

func newLogger(c config.Log, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(c.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// printBanner tells the user where the manager listens, where its data
// lives, and how to point the SDK at it.
func printBanner(w io.Writer, version string, cfg *config.Config, addr, consoleAddr net.Addr) {
	port := cfg.Server.Port
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = tcp.Port
	}
	listen := net.JoinHostPort(cfg.Server.Host, strconv.Itoa(port))
	endpoint, insecure := sdkEndpoint(cfg, port)
	scheme, protocols := "http", "HTTP/1.1 and h2c"
	if cfg.Server.TLS.Enabled {
		scheme, protocols = "https", "TLS, HTTP/2 and HTTP/1.1"
	}
	project := "flytesnacks"
	if len(cfg.Projects.Seed) > 0 {
		project = cfg.Projects.Seed[0]
	}
	flags := ""
	if insecure {
		flags = " --insecure"
	}
	red := cfg.Redacted()
	fmt.Fprintf(w, `flyte-manager %s is serving on %s://%s (Connect, gRPC, gRPC-Web; %s)
  data:     %s
  database: %s
  blobs:    %s

Point the Flyte SDK at it:
  flyte create config --endpoint %s%s --project %s --domain development
`, version, scheme, listen, protocols, cfg.Home, red.Database.DSN, red.Storage.URL, endpoint, flags, project)
	if cfg.Console.Enabled {
		scheme := "https"
		if insecure {
			scheme = "http"
		}
		console := scheme + "://" + endpoint + "/v2/"
		if tcp, ok := consoleAddr.(*net.TCPAddr); ok {
			console = fmt.Sprintf("http://localhost:%d/v2/", tcp.Port)
		}
		fmt.Fprintf(w, "\nWeb console:\n  %s\n", console)
	}
}

// sdkEndpoint is the endpoint to give the SDK: the external URL's host when
// one is configured, else the listening host (localhost for loopback and
// wildcard addresses) and port. insecure is false only for https.
func sdkEndpoint(cfg *config.Config, port int) (endpoint string, insecure bool) {
	if ext := cfg.Server.ExternalURL; ext != "" {
		if u, err := url.Parse(ext); err == nil && u.Host != "" {
			return u.Host, u.Scheme != "https"
		}
	}
	host := cfg.Server.Host
	switch host {
	case "", "0.0.0.0", "::", "127.0.0.1", "::1", "localhost":
		host = "localhost"
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), !cfg.Server.TLS.Enabled
}

func newIssuer(cfg *config.Config, gdb *gorm.DB) *apikey.Issuer {
	return apikey.NewIssuer(apikey.NewStore(gdb), apikey.DeriveSigningKey(cfg.Storage.SigningKey), cfg.Auth.TokenTTL)
}

// verifier is what authenticates callers with auth.mode required: task
// credentials, API keys and their tokens; nil with auth off.
func verifier(cfg *config.Config, gdb *gorm.DB) authn.Verifier {
	if !cfg.Auth.Required() {
		return nil
	}
	var next authn.Verifier = newIssuer(cfg, gdb)
	if cfg.Auth.OIDC.Enabled() { // people from an identity provider (internal/oidcauth)
		next = authn.Verifiers{oidcauth.New(cfg.Auth, nil), next}
	}
	next = authn.Verifiers{appCredentialKey(cfg, gdb), next} // apps' replicas (internal/appcred)
	return taskcred.Chain{Tasks: taskCredentialKey(cfg), Next: next}
}

// setupAuth turns on authentication when auth.mode is required: API keys
// and the tokens the token endpoint mints from them (apikey), and the
// credentials of tasks (taskcred).
func setupAuth(cfg *config.Config, gdb *gorm.DB, srv *server.Server, logger *slog.Logger) error {
	if !cfg.Auth.Required() {
		return nil
	}
	issuer := newIssuer(cfg, gdb)
	sessions, err := setupConsoleSignIn(cfg, gdb, srv, logger)
	if err != nil {
		return err
	}
	srv.RequireAuth(server.Auth{Header: cfg.Auth.AuthorizationMetadataKey, Verifier: verifier(cfg, gdb), Session: sessions})
	tokens := issuer.TokenHandler(logger)
	if cfg.Auth.OIDC.Enabled() { // the SDK's interactive grants go on to the provider (internal/oidcauth)
		tokens = oidcauth.TokenEndpoint(tokens, apikey.IsKeyID, oidcauth.NewDiscovery(cfg.Auth.OIDC.Issuer, nil), nil, logger)
	}
	if !cfg.Server.TLS.Enabled {
		logger.Warn("auth.mode is required but server.tls is off: the SDK sends credentials only over TLS, so SDK clients will be refused unless a TLS proxy sits in front")
	}
	return srv.Handle(server.Route{Pattern: "POST " + apikey.TokenPath, Handler: tokens})
}

// registerStorageMetrics registers what an operator watches of the
// database and the data dir: statements and their errors, the connection
// pool, and the data dir's filesystem.
func registerStorageMetrics(srv *server.Server, gdb *gorm.DB, home string) error {
	pool, err := db.PoolCollector(gdb)
	if err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{db.StatementCollector(gdb), pool, homeDiskCollector(home)} {
		if err := srv.Registry().Register(c); err != nil {
			return err
		}
	}
	return nil
}

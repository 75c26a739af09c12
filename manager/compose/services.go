package compose

import (
	"context"
	"net"

	"fmgr.dev/actions"
	"fmgr.dev/cache"
	"fmgr.dev/console"
	"fmgr.dev/dataproxy"
	"fmgr.dev/events"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/kube"
	"fmgr.dev/executor/local"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/imagebuilder"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/queues"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/runs"
	"fmgr.dev/secret"
	"fmgr.dev/trigger"
)

// Setup builds everything the manager serves and runs, in dependency order:
// storage, the run state with its executor, then each service through its
// package's Setup, which mounts its handlers and registers its workers,
// readiness checks, metrics and closers on d.Server.
func Setup(ctx context.Context, d *Deps) error {
	srv, cfg := d.Server, d.Config
	ep, err := listenS3Endpoint(cfg, d.Log)
	if err != nil {
		return err
	}
	blobs, err := openStorage(ctx, cfg.Storage, ep, d.Log)
	if err != nil {
		if ep != nil {
			_ = ep.ln.Close()
		}
		return err
	}
	srv.AddCloser("storage", func(context.Context) error { return blobs.Close() })
	if ep != nil {
		if err := ep.serve(srv, blobs, d.Log); err != nil {
			return err
		}
		d.S3Endpoint, d.S3TaskLocations = ep.url, ep.taskLocations
	}
	signer, err := blob.NewSigner([]byte(cfg.Storage.SigningKey))
	if err != nil {
		return err
	}

	st := store.New(d.DB)
	hub := runstate.NewHub(st.Actions, d.Log)
	if err := hub.Start(ctx); err != nil { // before anything can subscribe
		return err
	}
	srv.AddWorker("change fan-out", hub.Run)
	if err := srv.Registry().Register(hub); err != nil {
		return err
	}
	// The services that join the planning of every attempt.
	var hooks attempt.Hooks
	outputCache := cache.New(cfg.Cache, d.DB, blobs, st.Actions, d.Log)
	hooks.Cache = outputCache.Hook()
	secrets, err := secret.Open(d.DB, cfg.Secrets, cfg.Home, d.Log)
	if err != nil {
		return err
	}
	hooks.Secrets = secrets.Hook()
	hooks.Storage = storageAccess(blobs, cfg.Storage, ep)
	if d.Tracing.Enabled() {
		hooks.Tracer = d.Tracing.Tracer("fmgr.dev/executor/attempt")
	}
	hooks.Credential = taskCredentials(cfg)
	named := queues.New(cfg.Queues)
	if err := srv.Registry().Register(queues.NewCollector(named, st.Actions, d.Log)); err != nil {
		return err
	}
	state, exec, setupExecutor, err := newExecutor(d, st, blobs, hub, hooks, runstate.WithQueues(named))
	if err != nil {
		return err
	}

	triggers := trigger.NewService(st, cfg.Triggers.Minute, d.Log)

	// Images: the local executor builds them as Python environments, the
	// kubernetes executor as OCI images in its registry; either way the
	// SDK's remote builder finds its build-image task.
	var envs imagebuilder.Finder
	if ld, ok := exec.(*local.Driver); ok && ld.Images() != nil {
		envs = ld.Images()
	}
	if kd, ok := exec.(*kube.Driver); ok {
		if r, ok := kd.ImageRegistry(); ok {
			envs = r
		}
	}
	if envs != nil {
		if err := images.Deploy(ctx, st.Tasks); err != nil {
			return err
		}
	}

	if cfg.KubeAPI.Enabled {
		d.KubeAPI = newKubeAPI(d, st, hub, state, d.Version)
	}
	var apps appsFront
	for _, step := range []func() error{
		setupExecutor,
		func() error {
			return runs.Setup(ctx, srv, state, st, cfg.Projects, d.Log, runs.WithTaskTriggers(triggers), runs.WithAuth(cfg.Auth))
		},
		func() error { return runs.SetupTranslator(srv, state) },
		func() error { return actions.Setup(srv, state) },
		func() error {
			return dataproxy.Setup(srv, dataproxy.Deps{Store: blobs, Signer: signer, Runs: runData{state: state, logs: exec}, Presign: cfg.Storage.S3.PresignedURLs, Log: d.Log})
		},
		func() error { return events.Setup(srv, state, cfg.Events) },
		func() error { return cache.Setup(srv, outputCache) },
		func() error { return secret.Setup(srv, secrets) },
		func() (err error) { apps, err = setupApps(d, exec, blobs); return err },
		func() error { return setupTriggers(srv, cfg.Triggers, triggers, st, state, exec, d.Log) },
		func() error { return setupRetention(srv, cfg, st, blobs, exec, d.Log) },
		func() error { return imagebuilder.Setup(srv, envs) },
		func() error {
			if !cfg.Console.Enabled {
				return nil
			}
			if cfg.Console.App != "" {
				return setupConsoleApp(srv, apps, cfg, d.Log)
			}
			return console.Setup(srv)
		},
		func() error { return setupUnimplemented(srv) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// executor is what the manager needs of either driver: it is told about
// work, and it serves the attempts' logs.
type executor interface {
	runstate.Executor
	logSource
	// LeaseHeld: this manager holds the executor lease (and so fires
	// triggers too).
	LeaseHeld() bool
}

// newExecutor builds the run state with the configured executor, and the
// step that sets the executor up.
func newExecutor(d *Deps, st *store.Store, blobs *blob.Store, hub *runstate.Hub, hooks attempt.Hooks, opts ...runstate.Option) (*runstate.Service, executor, func() error, error) {
	srv, cfg := d.Server, d.Config
	advertised := func() string { return advertisedAddr(srv) }
	if cfg.Executor.Type == config.ExecutorKubernetes {
		rc, err := kube.RESTConfig(cfg.Executor.Kubernetes)
		if err != nil {
			return nil, nil, nil, err
		}
		state, exec := runstate.New(st, blobs, hub, cfg.Projects, d.Log, func(state *runstate.Service) *kube.Driver {
			return kube.New(state, rc, cfg.Executor.Kubernetes, cfg.Home, advertised, d.Log).WithHooks(hooks)
		}, opts...)
		return state, exec, func() error { return kube.Setup(srv, exec) }, nil
	}
	state, exec := runstate.New(st, blobs, hub, cfg.Projects, d.Log, func(state *runstate.Service) *local.Driver {
		return local.New(state, cfg.Executor, advertised, d.Log).WithHooks(hooks)
	}, opts...)
	return state, exec, func() error { return local.Setup(srv, exec) }, nil
}

// setupUnimplemented mounts the services later work items build: until
// then every procedure is routed and answers Unimplemented, none 404.
func setupUnimplemented(srv *server.Server) error {
	opts := srv.HandlerOptions()
	return srv.Mount(
		server.NewService(workflowconnect.NewInternalRunServiceHandler(workflowconnect.UnimplementedInternalRunServiceHandler{}, opts...)),
	)
}

// advertisedAddr is the host:port task processes use to reach the manager.
func advertisedAddr(srv *server.Server) string {
	addr := srv.Addr()
	if addr == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

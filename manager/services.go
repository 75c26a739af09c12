package main

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"fmgr.dev/actions"
	"fmgr.dev/app"
	"fmgr.dev/cache"
	"fmgr.dev/dataproxy"
	"fmgr.dev/executor/local"
	"fmgr.dev/gen/go/flyteidl2/trigger/triggerconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/server"
	"fmgr.dev/internal/store"
	"fmgr.dev/runs"
	"fmgr.dev/secret"
)

// services builds every Connect service the manager serves, each with
// d.server.HandlerOptions() so it gets the shared interceptors and limits,
// and registers the background workers (change fan-out, executor).
func services(ctx context.Context, d *deps) ([]server.Service, error) {
	opts := d.server.HandlerOptions()
	var svcs []server.Service
	add := func(path string, h http.Handler) { svcs = append(svcs, server.Service{Path: path, Handler: h}) }

	blobs, err := blob.Open(ctx, d.cfg.Storage.URL)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	d.server.AddCloser("storage", func(context.Context) error { return blobs.Close() })
	signer, err := blob.NewSigner([]byte(d.cfg.Storage.SigningKey))
	if err != nil {
		return nil, err
	}

	if d.cfg.Executor.Type != config.ExecutorLocal {
		return nil, fmt.Errorf("executor.type %q is not available in this build yet; use %q", d.cfg.Executor.Type, config.ExecutorLocal)
	}
	st := store.New(d.db)
	hub := runstate.NewHub(st.Actions, d.log)
	if err := hub.Start(ctx); err != nil { // before anything can subscribe
		return nil, err
	}
	state := runstate.New(st, blobs, hub, d.cfg.Projects, d.log)
	exec := local.New(state, d.cfg.Executor, func() string { return advertisedAddr(d) }, d.log)
	state.SetExecutor(exec)
	if err := exec.RegisterMetrics(d.server.Registry()); err != nil {
		return nil, err
	}
	d.workers = append(d.workers, worker{"change fan-out", hub.Run}, worker{"executor", exec.Run})
	// A standby executor (another manager holds the executor lease) is
	// ready: this manager serves the API in full, and /readyz says which
	// one it is (see local.Driver.Ready).
	d.server.AddReadinessCheck("executor", func(context.Context) error {
		if err := exec.Ready(); err != nil {
			return err
		}
		return server.Detail(exec.LeaseStatus())
	})

	add(runs.NewRunService(state).Handler(opts...))
	tasks := runs.NewTaskService(st, d.cfg.Projects, d.log)
	add(tasks.Handler(opts...))
	projects := runs.NewProjectService(st, d.cfg.Projects, d.log)
	if err := projects.Seed(ctx); err != nil {
		return nil, err
	}
	add(projects.Handler(opts...))
	for path, h := range runs.NewIdentityServices().Handlers(opts...) {
		add(path, h)
	}
	for path, h := range actions.New(state).Handlers(opts...) {
		add(path, h)
	}
	dp := dataproxy.New(dataproxy.Deps{Store: blobs, Signer: signer, Runs: runData{state: state, logs: exec}, Log: d.log})
	for _, r := range dp.Handlers(opts...) {
		if r.Path == blob.SignedPath {
			if err := d.server.Handle(server.Route{Pattern: r.Path, Handler: r.Handler}); err != nil {
				return nil, err
			}
			continue
		}
		add(r.Path, r.Handler)
	}

	// Services that later work items build answer Unimplemented until then:
	// every procedure is routed, none answers 404.
	internalRuns, internalRunsHandler := workflowconnect.NewInternalRunServiceHandler(workflowconnect.UnimplementedInternalRunServiceHandler{}, opts...)
	add(internalRuns, internalRunsHandler)
	translator, translatorHandler := workflowconnect.NewTranslatorServiceHandler(workflowconnect.UnimplementedTranslatorServiceHandler{}, opts...)
	add(translator, translatorHandler)
	triggers, triggersHandler := triggerconnect.NewTriggerServiceHandler(triggerconnect.UnimplementedTriggerServiceHandler{}, opts...)
	add(triggers, triggersHandler)
	for _, handlers := range []map[string]http.Handler{cache.Handlers(opts...), secret.Handlers(opts...), app.Handlers(opts...)} {
		for path, h := range handlers {
			add(path, h)
		}
	}
	return svcs, nil
}

// advertisedAddr is the host:port task processes use to reach the manager.
func advertisedAddr(d *deps) string {
	addr := d.server.Addr()
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

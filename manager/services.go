package main

import (
	"context"

	"fmgr.dev/internal/server"
)

// services builds every Connect service the manager serves. Build each
// handler with d.server.HandlerOptions() so it gets the shared interceptors
// and limits, e.g.
//
//	path, h := workflowconnect.NewRunServiceHandler(impl, d.server.HandlerOptions()...)
//	svcs = append(svcs, server.Service{Path: path, Handler: h})
//
// Plain HTTP endpoints go through d.server.Handle(server.Route{...});
// components that must be up for /readyz register d.server.AddReadinessCheck,
// and anything to stop at shutdown d.server.AddCloser (closers run in reverse
// order of registration, after in-flight calls finished; the database closer
// was registered first, so it runs last). ctx only covers setup: it is
// cancelled when the process is asked to stop.
func services(ctx context.Context, d *deps) ([]server.Service, error) {
	return nil, nil
}

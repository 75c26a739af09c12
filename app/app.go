// Package app serves flyteidl2.app.AppService and AppLogsService: apps
// (long-running servers the SDK's AppEnvironment declares) are kept in the
// database (store.go) and run by a runtime the composition gives
// (appruntime.Runtime: the local executor's replica supervisor), which
// reports what it observes back here (Service.Report); the reports become
// the app's conditions, newest last, and every change reaches the
// watchers (watch.go).
//
// What the SDK relies on: the spec comes back exactly as it was sent (the
// SDK compares it to decide whether a deploy changes anything, and a
// start/stop sends it back); the revision changes only when the spec does,
// so deploying an unchanged app changes nothing; Create of an existing app
// is ALREADY_EXISTS, upon which the SDK reads the app and updates it when
// its spec differs; Watch sends updates until the app is ACTIVE or FAILED.
package app

import (
	"context"
	"log/slog"
	"time"

	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/server"
)

// Options are what the service is built with.
type Options struct {
	// Runtime runs the apps' replicas; nil stores apps without running
	// them, their condition saying NoRuntime.
	Runtime   appruntime.Runtime
	NoRuntime string
	// PublicURL is the URL an app is reached at, for a request's context
	// (its base URL); nil leaves status.ingress empty.
	PublicURL func(ctx context.Context, k Key) string
	// Resync is how often every app is handed to the runtime again
	// (DefaultResync when 0).
	Resync time.Duration
	Log    *slog.Logger
}

// Setup mounts AppService and AppLogsService on srv and, with a runtime,
// hands the runtime every app once the server runs (after a restart, the
// apps that should be running start again).
func Setup(srv *server.Server, svc *Service) error {
	opts := srv.HandlerOptions()
	if svc.runtime != nil {
		srv.AddWorker("apps", svc.Run)
	}
	return srv.Mount(
		server.NewService(appconnect.NewAppServiceHandler(svc, opts...)),
		server.NewService(appconnect.NewAppLogsServiceHandler(logsHandler{svc}, opts...)),
	)
}

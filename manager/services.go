package main

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/gen/go/flyteidl2/auth/authconnect"
	"fmgr.dev/gen/go/flyteidl2/cacheservice/cacheserviceconnect"
	cachev2connect "fmgr.dev/gen/go/flyteidl2/cacheservice/v2/v2connect"
	"fmgr.dev/gen/go/flyteidl2/cluster/clusterconnect"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/gen/go/flyteidl2/project/projectconnect"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/gen/go/flyteidl2/task/taskconnect"
	"fmgr.dev/gen/go/flyteidl2/trigger/triggerconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/server"
)

// services builds every Connect service the manager serves, each with
// d.server.HandlerOptions() so it gets the shared interceptors and limits.
// Plain HTTP endpoints go through d.server.Handle; components that must be up
// for /readyz register d.server.AddReadinessCheck, and whatever must stop at
// shutdown d.server.AddCloser (closers run in reverse order of registration).
func services(ctx context.Context, d *deps) ([]server.Service, error) {
	opts := d.server.HandlerOptions()
	var svcs []server.Service
	add := func(path string, h http.Handler) { svcs = append(svcs, server.Service{Path: path, Handler: h}) }

	// Services whose behaviour later work items build answer Unimplemented
	// until then; every procedure is routed, none answers 404.
	for _, mount := range []func(...connect.HandlerOption) (string, http.Handler){
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return workflowconnect.NewRunServiceHandler(workflowconnect.UnimplementedRunServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return workflowconnect.NewQueueServiceHandler(workflowconnect.UnimplementedQueueServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return workflowconnect.NewStateServiceHandler(workflowconnect.UnimplementedStateServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return workflowconnect.NewInternalRunServiceHandler(workflowconnect.UnimplementedInternalRunServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return workflowconnect.NewTranslatorServiceHandler(workflowconnect.UnimplementedTranslatorServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return taskconnect.NewTaskServiceHandler(taskconnect.UnimplementedTaskServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return actionsconnect.NewActionsServiceHandler(actionsconnect.UnimplementedActionsServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return dataproxyconnect.NewDataProxyServiceHandler(dataproxyconnect.UnimplementedDataProxyServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return clusterconnect.NewClusterServiceHandler(clusterconnect.UnimplementedClusterServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return cacheserviceconnect.NewCacheServiceHandler(cacheserviceconnect.UnimplementedCacheServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return cachev2connect.NewCacheServiceHandler(cachev2connect.UnimplementedCacheServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return secretconnect.NewSecretServiceHandler(secretconnect.UnimplementedSecretServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return appconnect.NewAppServiceHandler(appconnect.UnimplementedAppServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return appconnect.NewAppLogsServiceHandler(appconnect.UnimplementedAppLogsServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return projectconnect.NewProjectServiceHandler(projectconnect.UnimplementedProjectServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return triggerconnect.NewTriggerServiceHandler(triggerconnect.UnimplementedTriggerServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return authconnect.NewIdentityServiceHandler(authconnect.UnimplementedIdentityServiceHandler{}, o...)
		},
		func(o ...connect.HandlerOption) (string, http.Handler) {
			return authconnect.NewAuthMetadataServiceHandler(authconnect.UnimplementedAuthMetadataServiceHandler{}, o...)
		},
	} {
		add(mount(opts...))
	}
	return svcs, nil
}

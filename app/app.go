// Package app serves flyteidl2.app.AppService and AppLogsService. Until the
// apps work item lands every procedure is routed and answers Unimplemented.
package app

import (
	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
	"fmgr.dev/internal/server"
)

// Setup mounts AppService and AppLogsService on srv.
func Setup(srv *server.Server) error {
	opts := srv.HandlerOptions()
	return srv.Mount(
		server.NewService(appconnect.NewAppServiceHandler(appconnect.UnimplementedAppServiceHandler{}, opts...)),
		server.NewService(appconnect.NewAppLogsServiceHandler(appconnect.UnimplementedAppLogsServiceHandler{}, opts...)),
	)
}

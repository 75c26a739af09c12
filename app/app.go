// Package app serves flyteidl2.app.AppService and AppLogsService. Until the
// apps work item lands every procedure is routed and answers Unimplemented.
package app

import (
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/app/appconnect"
)

// Handlers mounts AppService and AppLogsService.
func Handlers(opts ...connect.HandlerOption) map[string]http.Handler {
	appPath, apps := appconnect.NewAppServiceHandler(appconnect.UnimplementedAppServiceHandler{}, opts...)
	logsPath, logs := appconnect.NewAppLogsServiceHandler(appconnect.UnimplementedAppLogsServiceHandler{}, opts...)
	return map[string]http.Handler{appPath: apps, logsPath: logs}
}

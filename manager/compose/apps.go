package compose

import (
	"fmgr.dev/app"
)

// newApps builds the App service. Apps are stored and served by every
// manager; no executor runs their replicas yet.
func newApps(d *Deps, _ executor) *app.Service {
	return app.NewService(app.NewStore(d.DB), app.Options{
		NoRuntime: "this manager does not run apps yet",
		Log:       d.Log,
	})
}
